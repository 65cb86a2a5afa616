"""Every dashboard panel's and Grafana alert's SQL runs on a ClickHouse server the real pipeline filled
(unit/report/test_dashboards.py: the files themselves and the same on chDB)."""

from __future__ import annotations

import uuid

import pytest

# the helpers of the same tests' chDB half (conftest.py makes every test folder importable)
from test_dashboards import REPO, _check_alert_queries, _check_panels, _fill, _lag, logs  # noqa: F401 (the logs fixture)


@pytest.fixture(scope="module")
def server(logs, clickhouse, kafka):
    from cachescope.store import ClickHouseStore

    db = f"dash_{uuid.uuid4().hex[:8]}"
    store = ClickHouseStore(clickhouse.url, database=db)
    _fill(store, logs)
    _lag(store, kafka.bootstrap)
    yield store
    store.command(f"DROP DATABASE IF EXISTS {db}")
    store.close()


@pytest.mark.services
def test_every_panel_runs_on_the_clickhouse_server(server):
    assert _check_panels(server) >= 30


@pytest.mark.services
def test_grafana_alert_queries_run_on_the_server(server):
    _check_alert_queries(server, (REPO / "dashboards" / "provisioning" / "alerting" / "cachescope-rules.yaml")
                         .read_text())
