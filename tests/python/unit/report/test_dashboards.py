"""The Grafana dashboards and alerting files: generated from the read layer, committed, valid
against Grafana's dashboard schema, and every panel's SQL — with the ClickHouse plugin's macros
and the dashboard variables expanded as the plugin does — runs on the real ClickHouse server and
on chDB, filled by the real pipeline, and returns the columns its panel type needs, non-empty."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from pathlib import Path

import jsonschema
import pytest
import yaml

from cachescope.config import load_config
from runners.embedded import replay
from dashboards import generate
from ingest.generate import make_workload, write
from ingest.scenarios import apply

REPO = Path(__file__).resolve().parents[4]
SCHEMA = REPO.parent / "shared" / "reference" / "schemas" / "grafana-dashboard.schema.json"
START = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
END = START + dt.timedelta(days=2)
INTERVAL_S = 300  # what Grafana picks for 2 days at about 600 points


# --------------------------------------------------------------------------- the plugin's expansion

def expand(sql: str, variables: dict[str, list[str] | str], frm: dt.datetime, to: dt.datetime,
           interval_s: int) -> str:
    """What reaches ClickHouse: the front end puts the variables in raw (a multi-value or All as
    'a','b'), then the plugin's macros (grafana/clickhouse-datasource pkg/macros/macros.go) run."""
    def var(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        v = variables[name]
        return ",".join(f"'{x}'" for x in v) if isinstance(v, list) else str(v)

    sql = re.sub(r"\$\{(\w+)\}|\$(?!__)(\w+)", var, sql)
    f, t, n = int(frm.timestamp()), int(to.timestamp()), max(interval_s, 1)
    fm, tm = f * 1000, t * 1000
    rules = [
        (r"\$__timeFilter_ms\(([^)]*)\)", lambda m: f"{m[1]} >= fromUnixTimestamp64Milli({fm}) AND "
                                                    f"{m[1]} <= fromUnixTimestamp64Milli({tm})"),
        (r"\$__timeFilter\(([^)]*)\)", lambda m: f"{m[1]} >= toDateTime({f}) AND {m[1]} <= toDateTime({t})"),
        (r"\$__dateFilter\(([^)]*)\)", lambda m: f"{m[1]} >= toDate(toDateTime({f})) AND {m[1]} <= toDate(toDateTime({t}))"),
        (r"\$__timeInterval\(([^)]*)\)", lambda m: f"toStartOfInterval(toDateTime({m[1]}), INTERVAL {n} second)"),
        (r"\$__fromTime\b", lambda m: f"toDateTime({f})"),
        (r"\$__toTime\b", lambda m: f"toDateTime({t})"),
        (r"\$__interval_s\b", lambda m: str(n)),
    ]
    for pattern, repl in rules:
        sql = re.sub(pattern, repl, sql)
    assert "$" not in sql, f"unexpanded macro or variable in {sql[:300]}"
    return sql


# --------------------------------------------------------------------------- the data

@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> tuple[Path, list[Path]]:
    tmp = tmp_path_factory.mktemp("dash")
    w, _ = apply("hit-drop", make_workload(40_000, days=2, sites=1, servers=4, seed=5))
    files = write("xrootd-gstream", w, tmp / "logs", single_file=False)
    shadow = {"policies": ["lru", "arc", "xcache"], "curve": {"points": 12}}
    rules = {"defaults": True, "rules": [
        {"name": "hit-drop", "kind": "drop", "drop": 0.3, "over": "1h", "for": "15m", "policy": "lru"}]}
    # the site as one cache group, and one group per XCache server at a quarter of each size
    (tmp / "site.yaml").write_text(yaml.safe_dump({"site": w.sites[0], "alerts": rules, "pipeline": {
        "shadow": {"policies": shadow["policies"], "sizes": ["4TB", "20TB"]}, "curve": shadow["curve"]}}))
    (tmp / "servers.yaml").write_text(yaml.safe_dump({"site": w.sites[0], "cache_groups": {"mode": "server"},
                                                      "alerts": {"defaults": False}, "pipeline": {
        "shadow": {"policies": shadow["policies"], "sizes": ["1TB", "5TB"]}, "curve": shadow["curve"]}}))
    return tmp, files


def _fill(store, logs) -> None:
    tmp, files = logs
    for cfg in ("site.yaml", "servers.yaml"):
        replay(files, "xrootd-gstream", config=load_config(tmp / cfg), store=store)
    # an outage as a row writer reports it once the store is back (a real one: test_store_outage.py)
    from cachescope.core.health import health_rows
    from cachescope.store import tables

    store.insert(tables.PIPELINE_HEALTH, health_rows("writer", "", {"store_retries": 4, "store_unavailable_s": 7.5}))


@pytest.fixture(scope="module")
def chdb_store(logs, tmp_path_factory):
    from cachescope.store import EmbeddedStore

    store = EmbeddedStore(tmp_path_factory.mktemp("chdb") / "store", database="dash")
    _fill(store, logs)
    yield store
    store.close()


def _lag(store, bootstrap: str) -> None:
    """Consumer lag as the pipeline monitor samples it from the real broker: a group 40 records
    behind on a topic of 100."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    from runners.monitor import PipelineMonitor

    topic, group = f"dash-lag-{uuid.uuid4().hex[:8]}", f"dash-group-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(100):
        producer.send(topic, str(i).encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer.poll(timeout_ms=5000)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(60, "", -1)})
    consumer.close()
    mon = PipelineMonitor(bootstrap, store, {group: [topic]})
    try:
        assert [s.lag for s in mon.tick()] == [40]
    finally:
        mon.close()


# --------------------------------------------------------------------------- files

def _dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((REPO / "dashboards").glob("*.json"))}


def test_regenerating_changes_nothing():
    fresh = generate.render_all()
    assert len(fresh) == 8
    for path, text in fresh.items():
        assert path.exists(), f"{path} is not committed: run python -m dashboards.generate"
        assert path.read_text() == text, f"{path} is stale: run python -m dashboards.generate"


def test_dashboards_validate_against_grafanas_schema():
    schema = json.loads(SCHEMA.read_text())
    boards = _dashboards()
    assert len(boards) == 7
    for name, board in boards.items():
        jsonschema.validate(board, schema)
        names = {v["name"] for v in board["templating"]["list"]}
        assert {"site", "cache_group", "policy", "size", "tier"} <= names, name
        for panel in board["panels"]:
            for t in panel.get("targets", []):  # free-form in the schema: the plugin's fields checked here
                assert t["datasource"] == {"type": "grafana-clickhouse-datasource", "uid": generate.DATASOURCE_UID}
                assert t["editorType"] == "sql" and t["format"] in (0, 1) and t["rawSql"].startswith("SELECT")


def test_provisioning_files():
    prov = REPO / "dashboards" / "provisioning"
    ds = yaml.safe_load((prov / "datasources" / "clickhouse.yaml").read_text())["datasources"][0]
    assert ds["uid"] == generate.DATASOURCE_UID and ds["type"] == "grafana-clickhouse-datasource"
    # the variables docker-compose.yml and deploy/k8s set for Grafana
    assert ds["jsonData"]["protocol"] == "native" and ds["jsonData"]["defaultDatabase"] == "${CLICKHOUSE_DATABASE}"
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["grafana"]["environment"]
    for value in (*ds["jsonData"].values(), *ds["secureJsonData"].values()):
        if isinstance(value, str) and value.startswith("${"):
            assert value[2:-1] in compose, value
    assert "database" not in ds["jsonData"] and ds["secureJsonData"]["password"].startswith("${")
    rules = yaml.safe_load((prov / "alerting" / "cachescope-rules.yaml").read_text())
    assert rules["apiVersion"] == 1
    group = rules["groups"][0]
    assert {"orgId", "name", "folder", "interval", "rules"} <= set(group)
    for r in group["rules"]:
        assert {"uid", "title", "condition", "data", "for", "labels", "annotations"} <= set(r)
        assert [d["refId"] for d in r["data"]] == ["A", "B", "C"]
        assert r["data"][1]["datasourceUid"] == r["data"][2]["datasourceUid"] == "__expr__"
    cp = yaml.safe_load((prov / "alerting" / "contact-points.yaml").read_text())
    receiver = cp["contactPoints"][0]["receivers"][0]
    assert receiver["type"] == "webhook" and receiver["settings"]["url"][2:-1] in compose


# --------------------------------------------------------------------------- every panel's SQL

def _variables(store) -> dict[str, list[str] | str]:
    """The dashboard's variables as Grafana sets them: each query run, All selected."""
    board = _dashboards()["site-overview.json"]
    values: dict[str, list[str] | str] = {}
    for v in board["templating"]["list"]:  # in order: a variable may use the ones before it
        if v["type"] == "constant":
            values[v["name"]] = v["query"]
            continue
        df = store.query_frame(expand(v["query"], values, START, END, INTERVAL_S), {})
        opts = [str(x) for x in df.iloc[:, 0].tolist()]
        assert opts, f"variable {v['name']} has no values"
        values[v["name"]] = opts if v.get("multi") else opts[0]
    return values


def _numeric(df) -> list[str]:
    return [c for c in df.columns if df[c].dtype.kind in "iuf"]


#: panels of what components report about themselves: stamped with the wall clock when written
WALL_CLOCK = {"Event-time lag", "Late events", "Rows written", "Lines, accesses, rejects and skipped lines by reason",
              "Kafka consumer lag", "Store outages"}
#: panels whose rows come from a running Kafka (the pipeline monitor): the server test fills them
KAFKA = {"Kafka consumer lag"}


def _check_panels(store, kafka: bool = True) -> int:
    variables = _variables(store)
    now = dt.datetime.now(dt.timezone.utc)
    ran = 0
    for name, board in _dashboards().items():
        for panel in board["panels"]:
            for t in panel.get("targets", []):
                frm, to = (now - dt.timedelta(hours=1), now + dt.timedelta(minutes=1)) \
                    if panel["title"] in WALL_CLOCK else (START, END)
                sql = expand(t["rawSql"], variables, frm, to, INTERVAL_S)
                df = store.query_frame(sql, {})
                where = f"{name} / {panel['title']} / {t['refId']}"
                if not kafka and panel["title"] in KAFKA:
                    assert "time" in df.columns, where
                    continue
                assert len(df) > 0, f"{where}: no rows"
                kind = panel["type"]
                if kind == "timeseries":
                    assert "time" in df.columns and str(df["time"].dtype).startswith("datetime64"), where
                    assert _numeric(df), where
                    assert df[_numeric(df)].notna().any().any(), where
                elif kind == "barchart":
                    assert any(df[c].dtype == object for c in df.columns) and _numeric(df), where
                elif kind == "xychart":
                    assert len(_numeric(df)) >= 2, where
                elif kind == "stat":
                    assert _numeric(df), where
                ran += 1
    return ran


def test_every_panel_runs_on_chdb(chdb_store):
    assert _check_panels(chdb_store, kafka=False) >= 30


def _check_alert_queries(store, text: str) -> None:
    rules = yaml.safe_load(text)
    for r in rules["groups"][0]["rules"]:
        a = r["data"][0]
        span = dt.timedelta(seconds=a["relativeTimeRange"]["from"])
        # the hour of the campaign: the efficiency and drop rules see data there
        to = START + dt.timedelta(days=1, hours=11)
        df = store.query_frame(expand(a["model"]["rawSql"], {}, to - span, to, 60), {})
        assert list(df.columns) == ["cache_group", "value"], r["title"]


def test_grafana_alert_queries_run_on_chdb(chdb_store, tmp_path):
    _check_alert_queries(chdb_store, (REPO / "dashboards" / "provisioning" / "alerting" / "cachescope-rules.yaml")
                         .read_text())
    # a site's rules of every kind, rendered by the same command
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({"pipeline": {"shadow": {"policies": ["lru", "xcache"],
                                                                                "sizes": ["4TB", "20TB"]}},
                                                        "alerts": {"rules": [
        {"name": "real", "kind": "real_below_shadow", "policy": "xcache", "size": "4TB"},
        {"name": "real-low", "kind": "below", "source": "observed", "metric": "transfer", "threshold": 0.2},
        {"name": "stall", "kind": "stalled", "over": "10m"}]}}))
    out = tmp_path / "rules.yaml"
    assert generate.main(["--config", str(tmp_path / "site.yaml"), "--alerting-out", str(out)]) == 0
    text = out.read_text()
    assert {r["title"] for r in yaml.safe_load(text)["groups"][0]["rules"]} >= {"real", "real-low", "stall"}
    _check_alert_queries(chdb_store, text)
