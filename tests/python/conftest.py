import sys
from pathlib import Path

import pytest

# the real Kafka/ClickHouse fixtures (kafka, clickhouse, store, …): tests/python/services.py
pytest_plugins = ["services"]

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "DESIGN.md").exists():
        pytest.fail(f"{SHARED} is missing: the tests need ../shared beside the repository")
    return SHARED
