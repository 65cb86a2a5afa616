"""pytest plugin: the real Kafka and ClickHouse servers of scripts/services, and isolated
stores/topics per test. Loaded from conftest.py (`pytest_plugins`).

Session fixtures `kafka`, `clickhouse` and `rabbitmq` use the servers of this checkout when they are
already running (`scripts/services start`), else start them and stop them when the session
ends. Tests that use them are marked `services`. Per test: `kafka_topic` (a fresh topic name),
`server_store` (ClickHouseStore on a fresh database, dropped afterwards), `embedded_store`
(EmbeddedStore in tmp_path), and `store`, parametrized over both backends.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SERVICES = REPO / "scripts" / "services"
#: how long scripts/services waits for a server the tests start (Kafka, ClickHouse, Flink) to be ready,
#: in seconds: long enough for a loaded 2-core machine (180 s ran out there); a server that exits
#: ends the wait at once, and the script says what it waited for every 30 s and when it gives up
START_DEADLINE = 1800
os.environ.setdefault("CACHESCOPE_START_TIMEOUT", str(START_DEADLINE))  # every scripts/services the tests run


def services_env(name: str, env: dict | None = None) -> dict[str, str] | None:
    """KEY=VALUE of a running service (scripts/services env NAME), None when it is not running."""
    p = subprocess.run([str(SERVICES), "env", name], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return None
    return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)


def _start(name: str) -> None:
    # output goes to the terminal (pytest -s) or the captured log: start-up failures show there
    p = subprocess.run([str(SERVICES), "start", name], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"scripts/services start {name} failed:\n{p.stdout}\n{p.stderr}", pytrace=False)


def _stop(name: str) -> None:
    subprocess.run([str(SERVICES), "stop", name], check=True, capture_output=True)


@dataclass
class KafkaService:
    bootstrap: str
    env: dict[str, str] = field(repr=False)
    started_here: bool = False


@dataclass
class RabbitMQService:
    url: str  # amqp://guest:guest@127.0.0.1:PORT/%2F
    port: int
    env: dict[str, str] = field(repr=False)
    started_here: bool = False


@dataclass
class ClickHouseService:
    url: str  # clickhouse://127.0.0.1:PORT/default (native protocol)
    tcp_port: int
    http_port: int
    env: dict[str, str] = field(repr=False)
    started_here: bool = False


def _session_service(name: str):
    env = services_env(name)
    started = False
    if env is None:
        _start(name)
        started = True
        env = services_env(name)
        assert env is not None, f"{name} started but scripts/services env does not list it"
    return env, started


@pytest.fixture(scope="session")
def kafka():
    env, started = _session_service("kafka")
    yield KafkaService(bootstrap=env["KAFKA_BOOTSTRAP"], env=env, started_here=started)
    if started:
        _stop("kafka")


@pytest.fixture(scope="session")
def clickhouse():
    env, started = _session_service("clickhouse")
    yield ClickHouseService(url=env["CLICKHOUSE_URL"], tcp_port=int(env["CLICKHOUSE_TCP_PORT"]),
                            http_port=int(env["CLICKHOUSE_HTTP_PORT"]), env=env, started_here=started)
    if started:
        _stop("clickhouse")


@pytest.fixture(scope="session")
def rabbitmq():
    """Debian's RabbitMQ as a plain process (scripts/services start rabbitmq), stopped by PID."""
    env, started = _session_service("rabbitmq")
    yield RabbitMQService(url=env["RABBITMQ_URL"], port=int(env["RABBITMQ_PORT"]), env=env, started_here=started)
    if started:
        _stop("rabbitmq")


@pytest.fixture(scope="session")
def flink_jars() -> None:
    """The Flink job's Kafka connector jar (Maven Central, cached in .cache/flink-jars)."""
    p = subprocess.run([str(SERVICES), "install", "flink-jars"], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"scripts/services install flink-jars failed:\n{p.stdout}\n{p.stderr}", pytrace=False)


def unique_name(request, prefix: str) -> str:
    """A name no other test (or earlier run) uses: prefix, test name, random suffix."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:40]
    return f"{prefix}_{base}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic(kafka, request) -> str:
    return unique_name(request, "t")


@pytest.fixture
def server_store(clickhouse, request):
    from cachescope.store import ClickHouseStore

    db = unique_name(request, "test")
    store = ClickHouseStore(clickhouse.url, database=db)
    yield store
    store.command(f"DROP DATABASE IF EXISTS {db}")
    store.close()


@pytest.fixture
def embedded_store(tmp_path, request):
    from cachescope.store import EmbeddedStore

    store = EmbeddedStore(tmp_path / "store", database=unique_name(request, "test"))
    yield store
    store.close()  # chdb serves one path per process: the next test opens another


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.services)])
def store(request):
    """The same test on both backends: EmbeddedStore (chdb) and ClickHouseStore (real server)."""
    return request.getfixturevalue("embedded_store" if request.param == "embedded" else "server_store")


def topic_items(bootstrap: str, topic: str) -> list[dict]:
    """Every committed record of `topic` (read_committed), batched messages flattened to their
    events, partition by partition (so each cache group's events keep their order)."""
    import orjson
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or set())]
        items = []
        for tp in tps:
            c.assign([tp])
            c.seek_to_beginning(tp)
            end = c.end_offsets([tp])[tp]
            while c.position(tp) < end:
                for recs in c.poll(timeout_ms=1000).values():
                    for r in recs:
                        doc = orjson.loads(r.value)
                        columns = doc.get("columns") if isinstance(doc, dict) else None
                        if isinstance(columns, dict):  # a batch of events, by column
                            items.extend(dict(zip(columns, row)) for row in zip(*columns.values()))
                        else:
                            items.append(doc)
        return items
    finally:
        c.close()


def pytest_report_header(config):
    running = [n for n in ("kafka", "clickhouse", "rabbitmq") if os.path.exists(REPO / "var" / "services" / f"{n}.env")]
    return f"cachescope services already running: {', '.join(running) or 'none'} (scripts/services status)"
