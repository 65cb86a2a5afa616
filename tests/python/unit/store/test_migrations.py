"""Migrations on both backends: apply, re-apply (no-op), changed file (error), schema snapshot."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cachescope.store import tables
from cachescope.store import migrations as mig

SNAPSHOT = Path(__file__).resolve().parents[2] / "snapshots" / "clickhouse_schema.sql"
ALL_TABLES = sorted([*tables.DATA_TABLES, tables.SCHEMA_MIGRATIONS])


def test_split_statements():
    sql = "-- a; comment\nCREATE TABLE a (s String DEFAULT ';') ENGINE = Memory;\n/* b; */ SELECT 'x\\';y';\n-- end;\n"
    assert mig.split_statements(sql) == [
        "-- a; comment\nCREATE TABLE a (s String DEFAULT ';') ENGINE = Memory", "/* b; */ SELECT 'x\\';y'"]


def test_placeholders_are_checked():
    assert mig.render("CREATE TABLE {database}.t", {"database": "d"}) == "CREATE TABLE d.t"
    with pytest.raises(mig.MigrationError, match="unknown placeholder"):
        mig.render("{nope}", {"database": "d"})


def test_versions_must_be_contiguous(tmp_path):
    (tmp_path / "0001_a.sql").write_text("SELECT 1")
    (tmp_path / "0003_c.sql").write_text("SELECT 1")
    with pytest.raises(mig.MigrationError, match="without gaps"):
        mig.discover(tmp_path)


def test_migrate_is_idempotent(store):
    ran = mig.migrate(store)
    assert [m.label for m in ran] == [m.label for m in mig.discover()]
    assert store.tables() == ALL_TABLES
    assert mig.migrate(store) == []  # second run: nothing to do
    r = store.query("SELECT version, name, length(checksum) FROM schema_migrations ORDER BY version")
    assert r.rows == [(m.version, m.name, 64) for m in mig.discover()]
    assert all(s.applied_at is not None for s in mig.status(store))


def test_changed_applied_migration_is_an_error(store, tmp_path):
    d = tmp_path / "migrations"
    shutil.copytree(mig.migrations_dir(), d)
    mig.migrate(store, directory=d)
    f = d / "0004_mrc.sql"
    f.write_text(f.read_text().replace("sample_rate Float64", "sample_rate Float32"))
    with pytest.raises(mig.MigrationError, match="0004_mrc was changed after it was applied"):
        mig.migrate(store, directory=d)


def test_new_migration_applies_alone_and_unknown_version_is_refused(store, tmp_path):
    d = tmp_path / "migrations"
    shutil.copytree(mig.migrations_dir(), d)
    mig.migrate(store, directory=d)
    n = len(mig.discover(d)) + 1
    (d / f"{n:04d}_extra.sql").write_text("CREATE TABLE IF NOT EXISTS {database}.extra (a UInt8) ENGINE = MergeTree ORDER BY a;")
    assert [m.name for m in mig.migrate(store, directory=d)] == ["extra"]
    (d / f"{n:04d}_extra.sql").unlink()
    with pytest.raises(mig.MigrationError, match="newer cachescope"):
        mig.migrate(store, directory=d)


def test_ttl_is_configurable(store):
    mig.migrate(store, events_ttl_days=7, health_ttl_days=2)
    ddl = store.query("SHOW CREATE TABLE access_events").scalar()
    assert "toIntervalDay(7)" in ddl
    assert "toIntervalDay(2)" in store.query("SHOW CREATE TABLE pipeline_health").scalar()


def _normalised_schema(store) -> str:
    """SHOW CREATE of every table after the migrations, database name replaced (PostHog style)."""
    out = []
    for t in store.tables():
        ddl = store.query(f"SHOW CREATE TABLE {t}").scalar()
        ddl = ddl.replace(f"{store.database}.", "{database}.")
        ddl = re.sub(r"UUID '[0-9a-f-]+' ?", "", ddl)
        out.append(ddl.strip() + ";\n")
    return "\n".join(out)


def test_schema_snapshot(store):
    """The schema after all migrations, as the engine reports it, matches the checked-in snapshot
    on both backends. After a new migration: CACHESCOPE_UPDATE_SNAPSHOTS=1 pytest -k snapshot."""
    mig.migrate(store)
    got = _normalised_schema(store)
    if os.environ.get("CACHESCOPE_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(got)
    assert got == SNAPSHOT.read_text()


def test_cli_migrate_embedded(tmp_path):
    exe = Path(sys.executable).parent / "cachescope"
    first = subprocess.run([str(exe), "migrate", "--store", str(tmp_path / "s"), "--database", "cli"],
                           capture_output=True, text=True, check=True)
    assert "applied 0001_access_events" in first.stdout
    again = subprocess.run([str(exe), "migrate", "--store", str(tmp_path / "s"), "--database", "cli"],
                           capture_output=True, text=True, check=True)
    assert "0 migration(s) applied" in again.stdout
    bad = subprocess.run([str(exe), "migrate", "--database", "cli"], capture_output=True, text=True)
    assert bad.returncode != 0


def test_migrations_are_package_data():
    """Found through importlib.resources inside the package: a wheel or an image carries them."""
    import cachescope

    assert mig.migrations_dir().is_relative_to(Path(cachescope.__file__).parent)
    assert [m.version for m in mig.discover()] == list(range(1, len(mig.discover()) + 1))


def test_access_events_columns_are_the_contract(store):
    from cachescope.events import CLICKHOUSE_TYPES

    mig.migrate(store)
    assert store.schema(tables.ACCESS_EVENTS) == CLICKHOUSE_TYPES


def test_old_store_moves_to_the_new_keys_without_losing_rows(store, tmp_path):
    """A store migrated by 0001–0006 (old event key, maxMap rollups) keeps every row through
    0007 (event identity) and 0008 (rollups from the core), and 0007 survives being re-run."""
    old = tmp_path / "old"
    old.mkdir()
    for m in mig.discover():
        if m.version <= 6:
            shutil.copy(m.path, old / m.path.name)
    mig.migrate(store, events_ttl_days=0, directory=old)
    n = 500
    ts = np.datetime64("2024-05-01", "us") + (np.arange(n) // 5).astype("timedelta64[s]")
    store.insert(tables.ACCESS_EVENTS, {
        "ts": ts, "site": ["S"] * n, "source": np.array(["dcache-billing", "eos-report"] * (n // 2), dtype=object),
        "server": ["p1"] * n, "client": [""] * n, "vo": ["atlas"] * n, "path": [f"/f{i}" for i in range(n)],
        "file_id": np.arange(n, dtype=np.uint64), "file_size": np.full(n, 10, dtype=np.uint64),
        "bytes_read": np.full(n, 10, dtype=np.uint64), "op": ["read"] * n, "tier": ["AOD"] * n,
        "cache_group": ["g"] * n, "seq": np.arange(n, dtype=np.uint64)})
    w = np.datetime64("2024-05-01T00:00", "s") + np.arange(120).astype("timedelta64[m]")
    store.insert(tables.EFFICIENCY, {
        "window_start": w, "window_end": w + np.timedelta64(1, "m"), "cache_group": ["g"] * 120,
        "policy": ["lru"] * 120, "size_bytes": np.full(120, 10**12, dtype=np.uint64), "tier": ["AOD"] * 120,
        "sample_rate": np.ones(120), "partitions": np.ones(120, dtype=np.uint32),
        "requests": np.full(120, 3, dtype=np.uint64), "hits": np.full(120, 1, dtype=np.uint64),
        "bytes_requested": np.full(120, 30, dtype=np.uint64), "bytes_hit": np.full(120, 10, dtype=np.uint64),
        "bytes_filled": np.zeros(120, dtype=np.uint64), "evictions": np.zeros(120, dtype=np.uint64),
        "bytes_evicted": np.zeros(120, dtype=np.uint64)})
    ran = mig.migrate(store, events_ttl_days=0)
    assert [m.version for m in ran] == [m.version for m in mig.discover() if m.version > 6]
    assert store.query("SELECT count() FROM access_events FINAL").scalar() == n
    assert store.query("SELECT uniqExact(origin) FROM access_events").scalar() == 2
    assert "ORDER BY (cache_group, ts, origin, seq)" in store.query("SHOW CREATE TABLE access_events").scalar()
    hourly = store.query("SELECT count(), sum(requests) FROM efficiency_hourly FINAL").rows[0]
    daily = store.query("SELECT count(), sum(requests) FROM efficiency_daily FINAL").rows[0]
    assert hourly == (2, 360) and daily == (1, 360)
    # 0007 again, as after an interruption: nothing changes, nothing is lost
    m7 = next(m for m in mig.discover() if m.version == 7)
    m7.apply(store, {"database": store.database, "events_ttl": ""})
    assert store.query("SELECT count() FROM access_events FINAL").scalar() == n
    assert sorted(store.tables()) == ALL_TABLES
