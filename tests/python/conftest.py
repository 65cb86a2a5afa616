"""Shared fixtures for both tiers: the shared/ folder beside the repository, a parser of fixture
lines, the real servers (support/services.py), and the `integration` mark.

unit/ needs no server; integration/ starts (and stops) real Kafka, ClickHouse, Flink, RabbitMQ,
XRootD or a browser. Every test under integration/, and every test anywhere that needs a server
(marked `services` or `xcache`, e.g. the `store` fixture's ClickHouse-server case, or asking for a
server fixture), is marked `integration`: `scripts/test --fast` deselects them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# Some tests import another test module's helpers by its name (`from test_flink_job import …`),
# as when they shared one folder: every test folder is importable, so that works from any tier
# (pytest imports test files by their basename too, so each stays one module)
sys.path[1:1] = sorted({str(p.parent) for p in HERE.glob("*/**/test_*.py")} - set(sys.path))

from support.data import SHARED, parse_lines

# the real Kafka/ClickHouse fixtures (kafka, clickhouse, store, …): tests/python/support/services.py
pytest_plugins = ["support.services"]

INTEGRATION = HERE / "integration"
SERVER_FIXTURES = {"kafka", "kafka_topic", "clickhouse", "server_store", "rabbitmq", "flink_jars"}
SERVER_MARKS = {"services", "xcache", "concurrency"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if (INTEGRATION in item.path.parents or SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
                or any(item.get_closest_marker(name) for name in SERVER_MARKS)):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "DESIGN.md").exists():
        pytest.fail(f"{SHARED} is missing: the tests need ../shared beside the repository")
    return SHARED


@pytest.fixture
def parse():
    return parse_lines
