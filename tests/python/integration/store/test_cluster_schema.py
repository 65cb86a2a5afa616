"""The replicated and distributed schema (cachescope.store.cluster) on real ClickHouse servers.

Two ClickHouse 26.7 servers (libchdb, started by the same launcher as scripts/services) form a
cluster `cachescope` of two shards: each reads a config.xml from its data directory
(clickhouse-local loads ./config.xml) with `remote_servers`, the {cluster}/{shard}/{replica}
macros and an in-process Keeper (`zookeeper.implementation = testkeeper`).

What runs for real: both variants' every statement is created on both servers; rows written
through the Distributed tables land on the shard of their cache group and read back whole, with
FINAL collapsing a replayed copy. What cannot run here: inserts into the Replicated* tables
(clickhouse-local has no interserver endpoint, so a replicated table stays read-only after it is
created); in production the ClickHouseInstallation's Keeper and pods provide them.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cachescope.store import ClickHouseStore
from cachescope.store import cluster as cl

pytestmark = pytest.mark.services

REPO = Path(__file__).resolve().parents[4]
CLUSTER = "cachescope"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _libchdb() -> Path:
    cache = Path(os.environ.get("CACHESCOPE_CACHE_DIR", REPO / ".cache"))
    found = sorted(cache.glob("clickhouse/*/libchdb.so"))
    if not found:
        pytest.fail(f"no libchdb.so under {cache}/clickhouse: run scripts/services install clickhouse", pytrace=False)
    return found[-1]


def _config(shard: int, tcp_ports: list[int]) -> str:
    shards = "".join(f"<shard><replica><host>127.0.0.1</host><port>{p}</port></replica></shard>" for p in tcp_ports)
    return f"""<clickhouse>
  <zookeeper><implementation>testkeeper</implementation></zookeeper>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <macros><cluster>{CLUSTER}</cluster><shard>{shard:02d}</shard><replica>r1</replica></macros>
  <remote_servers><{CLUSTER}>{shards}</{CLUSTER}></remote_servers>
</clickhouse>
"""


@pytest.fixture(scope="module")
def two_shards(clickhouse, tmp_path_factory):
    """Two servers, shards 01 and 02 of cluster `cachescope`: their native ports."""
    lib = _libchdb()  # installed by the `clickhouse` fixture
    ports = [(_free_port(), _free_port()) for _ in range(2)]
    procs = []
    try:
        for i, (tcp, http) in enumerate(ports, start=1):
            d = tmp_path_factory.mktemp(f"shard{i}")
            (d / "config.xml").write_text(_config(i, [p[0] for p in ports]))
            log = open(d / "server.log", "w")
            procs.append(subprocess.Popen(
                [sys.executable, str(REPO / "scripts/lib/clickhouse_server.py"), "--lib", str(lib), "--path", f"{d}/",
                 "--tcp-port", str(tcp), "--http-port", str(http)], stdout=log, stderr=log, stdin=subprocess.DEVNULL))
        for (tcp, _), p in zip(ports, procs):
            _wait_ready(tcp, p)
        yield [tcp for tcp, _ in ports]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _wait_ready(tcp: int, proc: subprocess.Popen) -> None:
    from clickhouse_driver import Client

    while True:  # no deadline (shared machine): a server that dies ends the wait
        if proc.poll() is not None:
            pytest.fail(f"ClickHouse shard on port {tcp} exited ({proc.returncode})", pytrace=False)
        try:
            Client("127.0.0.1", port=tcp).execute("SELECT 1")
            return
        except Exception:
            time.sleep(0.2)


def _stores(ports: list[int], db: str) -> list[ClickHouseStore]:
    return [ClickHouseStore(f"clickhouse://127.0.0.1:{p}", database=db) for p in ports]


def _events(groups: list[str], per_group: int, origin: bool = True) -> dict[str, list]:
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rows = [(g, i) for g in groups for i in range(per_group)]
    n = len(rows)
    return {
        "ts": [t0 + dt.timedelta(seconds=i) for _, i in rows], "site": ["S"] * n, "source": ["csv"] * n,
        "server": ["s1"] * n, "client": [""] * n, "vo": ["atlas"] * n, "path": [f"/f{i}" for _, i in rows],
        "file_id": [i for _, i in rows], "file_size": [100] * n, "bytes_read": [100] * n, "op": ["read"] * n,
        "tier": ["AOD"] * n, "cache_group": [g for g, _ in rows], "observed_hit_bytes": [None] * n,
        "observed_miss_bytes": [None] * n, "observed_bypass_bytes": [None] * n, "seq": [i for _, i in rows],
        **({"origin": ["host:/log"] * n} if origin else {}),
    }


def test_sharded_schema_writes_and_reads_through_distributed_tables(two_shards):
    """Shards without replicas: every table `<name>_local` + Distributed `<name>`, applied on both
    servers; rows written through one server spread by cache group and read back whole."""
    db = f"cl_{uuid.uuid4().hex[:8]}"
    stores = _stores(two_shards, db)
    variant = cl.Variant(replicated=False, distributed=True, cluster=CLUSTER)
    try:
        for s in stores:
            ran = cl.apply(s, variant, events_ttl_days=0)
            assert ran, "no migration applied"
            assert cl.apply(s, variant, events_ttl_days=0) == []  # idempotent
        engines = dict(stores[0].query(f"SELECT name, engine FROM system.tables WHERE database = '{db}'").rows)
        assert engines["access_events"] == "Distributed" and engines["access_events_local"] == "ReplacingMergeTree"
        assert engines["efficiency"] == "Distributed" and engines["efficiency_local"] == "ReplacingMergeTree"
        # materialized views read and write the local tables, never a Distributed one
        for name, q in stores[0].query(
                f"SELECT name, create_table_query FROM system.tables WHERE database = '{db}' "
                "AND engine = 'MaterializedView'").rows:
            for t, e in engines.items():
                if e == "Distributed":
                    assert f"{db}.{t} " not in q + " " and f"{db}.{t}\n" not in q, (name, t)

        groups = [f"group{i}" for i in range(8)]
        ev = _events(groups, 50)
        settings = {"distributed_foreground_insert": 1}
        stores[0].insert("access_events", ev, settings=settings)
        stores[0].insert("access_events", ev, settings=settings)  # a replay writes every row again
        total = stores[1].query("SELECT count() FROM access_events FINAL").scalar()
        assert total == len(groups) * 50
        # each cache group on exactly one shard, and the shard its hash names
        per_shard = [dict(s.query("SELECT cache_group, count() FROM access_events_local FINAL GROUP BY cache_group").rows)
                     for s in stores]
        expected = dict(stores[0].query(
            "SELECT g, cityHash64(g) % 2 FROM (SELECT arrayJoin({gs:Array(String)}) AS g)", {"gs": groups}).rows)
        for g in groups:
            shard = expected[g]
            assert per_shard[shard].get(g) == 50 and g not in per_shard[1 - shard], g
        assert all(per_shard), "both shards hold rows"
    finally:
        for s in stores:
            s.command(f"DROP DATABASE IF EXISTS {db}")
            s.close()


def test_upgrade_runs_new_migrations_rewritten(two_shards, tmp_path):
    """A cluster schema made by the first six migrations, with rows, then upgraded: the Python
    migrations (0007 rebuilds access_events by copy and RENAME, 0008 ALTERs keys and creates the
    hour/day tables AS efficiency) run through the rewriting store on both shards."""
    import shutil

    from cachescope.store import migrations

    every = migrations.discover()
    if len(every) <= 6:
        pytest.fail("expected Python migrations after 0006 (event identity, core rollups)")
    first = tmp_path / "first"
    first.mkdir()
    for m in every[:6]:
        shutil.copy(m.path, first / m.path.name)
    db = f"clu_{uuid.uuid4().hex[:8]}"
    stores = _stores(two_shards, db)
    variant = cl.Variant(replicated=False, distributed=True, cluster=CLUSTER)
    try:
        for s in stores:
            assert len(cl.apply(s, variant, events_ttl_days=0, directory=first)) == 6
        ev = _events([f"g{i}" for i in range(6)], 20, origin=False)
        stores[0].insert("access_events", ev, settings={"distributed_foreground_insert": 1})
        for s in stores:
            ran = cl.apply(s, variant, events_ttl_days=0)
            assert [m.version for m in ran] == [m.version for m in every[6:]]
        # each shard copied its own rows (node by node, local to local)
        assert stores[1].query("SELECT count(), countIf(startsWith(origin, 'legacy:')) FROM access_events FINAL"
                               ).rows == [(120, 120)]
        for s in stores:
            engines = dict(s.query(f"SELECT name, engine FROM system.tables WHERE database = '{db}'").rows)
            assert engines["efficiency_hourly"] == "Distributed" and engines["efficiency_hourly_local"] == "ReplacingMergeTree"
            cols = s.query(f"SELECT name FROM system.columns WHERE database = '{db}' AND table = 'efficiency'").column("name")
            assert "run" in cols
            assert not [n for n in engines if n.startswith("access_events_") and n != "access_events_local"]
    finally:
        for s in stores:
            s.command(f"DROP DATABASE IF EXISTS {db}")
            s.close()


def test_replicated_schema_creates_on_both_shards(two_shards):
    """ReplicatedReplacingMergeTree locals + Distributed tables: every statement created on both
    shards, Keeper paths from the macros. Inserts are not run (read-only replicas here)."""
    db = f"clr_{uuid.uuid4().hex[:8]}"
    stores = _stores(two_shards, db)
    variant = cl.Variant(replicated=True, distributed=True, cluster=CLUSTER)
    scratch = ClickHouseStore(f"clickhouse://127.0.0.1:{two_shards[0]}", database=f"plan_{uuid.uuid4().hex[:8]}")
    try:
        rendered = cl.render(db, variant, scratch)
        for s in stores:
            for stmt in rendered:
                s.command(stmt)
        for shard, s in enumerate(stores, start=1):
            replicas = dict(s.query(f"SELECT table, zookeeper_path FROM system.replicas WHERE database = '{db}'").rows)
            assert replicas["access_events_local"] == f"/clickhouse/{CLUSTER}/tables/{shard:02d}/{db}/access_events_local"
            assert replicas["efficiency_local"] == f"/clickhouse/{CLUSTER}/tables/{shard:02d}/{db}/efficiency_local"
            assert replicas["schema_migrations"] == f"/clickhouse/{CLUSTER}/tables/all/{db}/schema_migrations"
            engines = dict(s.query(f"SELECT name, engine FROM system.tables WHERE database = '{db}'").rows)
            assert engines["access_events_local"] == "ReplicatedReplacingMergeTree"
            assert engines["pipeline_health_local"] == "ReplicatedMergeTree"
            for name in ("access_events", "efficiency", "efficiency_hourly", "mrc", "observed", "pipeline_health"):
                assert engines[name] == "Distributed", name
            # the same columns as the single-node schema
            plan_cols = scratch.query(f"SELECT table, name, type FROM system.columns WHERE database = '{scratch.database}' "
                                      "AND table = 'access_events' ORDER BY position").rows
            cols = s.query(f"SELECT 'access_events', name, type FROM system.columns WHERE database = '{db}' "
                           "AND table = 'access_events_local' ORDER BY position").rows
            assert cols == plan_cols
            # a read through the Distributed table reaches both shards' replicated tables
            assert s.query("SELECT count() FROM access_events").scalar() == 0
    finally:
        scratch.command(f"DROP DATABASE IF EXISTS {scratch.database}")
        scratch.close()
        for s in stores:
            s.command(f"DROP DATABASE IF EXISTS {db} SYNC")
            s.close()


def test_on_cluster_statements_parse_on_the_server(clickhouse):
    """The ON CLUSTER form (one migration job for every node, needs Keeper) is valid SQL for
    ClickHouse 26.7: formatQuery on the real server parses every statement."""
    s = ClickHouseStore(clickhouse.url, database="default")
    scratch = ClickHouseStore(clickhouse.url, database=f"plan_{uuid.uuid4().hex[:8]}")
    try:
        variant = cl.Variant(replicated=True, distributed=True, cluster=CLUSTER, on_cluster=True)
        for stmt in cl.render("cachescope", variant, scratch):
            formatted = s.query("SELECT formatQuery({q:String})", {"q": stmt}).scalar()
            assert f"ON CLUSTER {CLUSTER}" in formatted, formatted[:120]
    finally:
        scratch.command(f"DROP DATABASE IF EXISTS {scratch.database}")
        scratch.close()
        s.close()


def test_unknown_statement_kinds_are_refused():
    with pytest.raises(cl.ClusterSchemaError, match="teach"):
        cl.rewrite(["OPTIMIZE TABLE db.t FINAL"], "db", cl.Variant(), {})


def test_alter_rename_and_drop_reach_local_and_distributed_tables():
    tables: dict[str, str] = {}
    v = cl.Variant(replicated=False, cluster="c", on_cluster=True)
    on = " ON CLUSTER 'c'"
    cl.rewrite(["CREATE TABLE IF NOT EXISTS db.t (cache_group String) ENGINE = MergeTree ORDER BY cache_group"],
               "db", v, tables)
    dist = "CREATE TABLE IF NOT EXISTS db.{n}%s AS db.{n}_local\nENGINE = Distributed('c', 'db', '{n}_local', " \
           "cityHash64(cache_group))" % on
    assert cl.rewrite(["ALTER TABLE db.t ADD COLUMN x UInt8, MODIFY ORDER BY (cache_group, x)"], "db", v, tables) == [
        f"ALTER TABLE db.t_local{on} ADD COLUMN x UInt8, MODIFY ORDER BY (cache_group, x)",
        f"DROP TABLE IF EXISTS db.t{on} SYNC", dist.format(n="t")]
    assert cl.rewrite(["RENAME TABLE db.t TO db.u"], "db", v, tables) == [
        f"RENAME TABLE db.t_local TO db.u_local{on}", f"DROP TABLE IF EXISTS db.t{on} SYNC", dist.format(n="u")]
    assert cl.rewrite(["TRUNCATE TABLE db.u"], "db", v, tables) == [f"TRUNCATE TABLE db.u_local{on}"]
    assert cl.rewrite(["DROP TABLE IF EXISTS db.u"], "db", v, tables) == [
        f"DROP TABLE IF EXISTS db.u{on}", f"DROP TABLE IF EXISTS db.u_local{on} SYNC"]
    assert tables == {}


def test_copied_engine_gets_its_own_keeper_path():
    full = "ReplicatedReplacingMergeTree('/clickhouse/{cluster}/tables/{shard}/db/e_local', '{replica}') ORDER BY a"
    assert cl.single_node_engine(full) == "ReplacingMergeTree ORDER BY a"
    tables = {"e": "cityHash64(cache_group)"}
    out = cl.rewrite(["CREATE TABLE IF NOT EXISTS db.h AS db.e"], "db", cl.Variant(cluster="c"), tables,
                     engine_of=lambda t: cl.single_node_engine(full))
    assert "ReplicatedReplacingMergeTree('/clickhouse/{cluster}/tables/{shard}/db/h_local', '{replica}')" in out[0]
    assert tables["h"] == tables["e"]


def test_cli_render_and_unreachable_server():
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-m", "cachescope.store.cluster", "render", "--database", "x", "--cluster", "c"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "ReplicatedReplacingMergeTree('/clickhouse/{cluster}/tables/{shard}/x/access_events_local'" in p.stdout
    p = subprocess.run([sys.executable, "-m", "cachescope.store.cluster", "apply", "--clickhouse",
                        f"clickhouse://127.0.0.1:{_free_port()}"], capture_output=True, text=True, env=env)
    assert p.returncode == 1
    assert p.stderr.startswith("cluster: clickhouse://127.0.0.1:") and "Traceback" not in p.stderr
