"""Shared fixtures for both tiers: the shared/ folder beside the repository, a parser of fixture
lines, the real servers (support/services.py), and the `integration` mark.

unit/ needs no server; integration/ starts (and stops) real Kafka, ClickHouse, Flink, RabbitMQ,
XRootD or a browser. Every test under integration/, and every test anywhere that needs a server
(marked `services` or `xcache`, e.g. the `store` fixture's ClickHouse-server case, or asking for a
server fixture), is marked `integration`: `scripts/test --fast` deselects them."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.data import SHARED, parse_lines

# the real Kafka/ClickHouse fixtures (kafka, clickhouse, store, …): tests/python/support/services.py
pytest_plugins = ["support.services"]

INTEGRATION = Path(__file__).resolve().parent / "integration"
SERVER_FIXTURES = {"kafka", "kafka_topic", "clickhouse", "server_store", "rabbitmq", "flink_jars"}
SERVER_MARKS = {"services", "xcache", "concurrency"}


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
