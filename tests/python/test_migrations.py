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

SNAPSHOT = Path(__file__).parent / "snapshots" / "clickhouse_schema.sql"
ALL_TABLES = sorted([tables.ACCESS_EVENTS, tables.EFFICIENCY, tables.EFFICIENCY_HOURLY, tables.EFFICIENCY_DAILY,
                     tables.EFFICIENCY_HOURLY_MV, tables.EFFICIENCY_DAILY_MV, tables.EFFICIENCY_HOURLY_VIEW,
                     tables.EFFICIENCY_DAILY_VIEW, tables.MRC, tables.OBSERVED, tables.PIPELINE_HEALTH,
                     tables.SCHEMA_MIGRATIONS])


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
