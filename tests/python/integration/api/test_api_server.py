"""The REST API over a ClickHouse server, filled by the core's GroupState path (unit/api/test_api.py:
the same answers over chDB)."""

from __future__ import annotations

import hashlib
import threading

import pytest

# the helpers of the same tests' chDB half (conftest.py makes every test folder importable)
from test_api import COPY_QUERIES, FROM, POLICIES, SIZES, TO, assert_copy_equals_sql, assert_routed_by_server, copy_and_sql_apps, fill_three_servers, same, simulate, write_trace


@pytest.mark.services
def test_server_backend_answers_the_same(server_store, tmp_path):
    """The server store filled by the core's GroupState path (the embedded runner into a server store)."""
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app
    from cachescope.config import load_config
    from runners.embedded import replay

    write_trace(tmp_path / "t.csv", 5000, seed=4)
    replay([tmp_path / "t.csv"], "csv", config=load_config(), store=server_store, site="SRV")
    token = "t0ken"
    settings = Settings(clickhouse_url=server_store.url, database=server_store.database,
                        api_tokens=hashlib.sha256(token.encode()).hexdigest() + ":read+whatif")
    auth = {"Authorization": f"Bearer {token}"}
    want = simulate(tmp_path / "t.csv")
    with TestClient(create_app(settings)) as c:
        assert c.get("/healthz").json()["backend"] == "server"
        r = c.post("/v1/whatif", json={"policy": POLICIES, "size": SIZES, "from": FROM, "to": TO}, headers=auth)
        assert r.status_code == 200, r.text
        for a in r.json()["results"]:
            same(a, want[(a["policy"], a["size_bytes"])])
        eff = c.get("/v1/efficiency", params={"step": "1h", "policy": "lru", "size": "1TB", "from": FROM, "to": TO},
                    headers=auth).json()
        w = c.post("/v1/whatif", json={"policy": "lru", "size": "1TB", "from": FROM, "to": TO}, headers=auth).json()
        assert sum(eff["series"][0]["hits"]) == w["hits"]
        # the table copy of /v1/efficiency answers as the read layer over a server too
        copy, sql = copy_and_sql_apps(c.app)
        assert assert_copy_equals_sql(copy, sql, COPY_QUERIES, headers=auth) > 100
        # concurrent readers each get their own server connection
        results = []
        threads = [threading.Thread(target=lambda: results.append(c.get("/v1/configs", headers=auth).status_code))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [200] * 8


@pytest.mark.services
def test_partitions_route_by_server_over_a_clickhouse_server(server_store, tmp_path):
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app

    from cachescope.store import migrations

    migrations.migrate(server_store, events_ttl_days=0)  # 2023 accesses: a 90-day TTL would drop them
    traces = fill_three_servers(server_store, tmp_path, "SPLIT-SERVER")
    token = "t0ken"
    settings = Settings(clickhouse_url=server_store.url, database=server_store.database,
                        api_tokens=hashlib.sha256(token.encode()).hexdigest() + ":read+whatif")
    with TestClient(create_app(settings)) as c:
        def post(body):
            r = c.post("/v1/whatif", json={"from": FROM, "to": TO, **body}, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200, r.text
            return r.json()

        assert_routed_by_server(post, traces, "SPLIT-SERVER")
