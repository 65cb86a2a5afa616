"""Shared fixtures and helpers: the shared/ folder beside the repository, fixture files (records
copied from public sources, named in each file's header)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachescope.config import load_config
from ingest.pipeline import LineParser

# the real Kafka/ClickHouse fixtures (kafka, clickhouse, store, …): tests/python/services.py
pytest_plugins = ["services"]

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "DESIGN.md").exists():
        pytest.fail(f"{SHARED} is missing: the tests need ../shared beside the repository")
    return SHARED


def fixture_lines(name: str) -> list[str]:
    """Data lines of a fixture file (its '#' header lines name the sources)."""
    return [line for line in (FIXTURES / name).read_text().splitlines() if not line.startswith("#")]


def parse_lines(fmt: str, lines: list[str], **kwargs):
    kwargs.setdefault("config", load_config())
    parser = LineParser(fmt, **kwargs)
    events = parser.parse_all(lines)
    return events, parser.rejects, parser


@pytest.fixture
def parse():
    return parse_lines
