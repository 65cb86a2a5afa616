"""scripts/services start clickhouse --shards 2: two ClickHouse servers forming cluster `cachescope`,
with the Distributed schema of cachescope/store/cluster.py applied on both, in a var/ of their own.

One shard is SIGKILLed and started again by the same command, on the same ports and data. The URL
asks for foreground Distributed inserts, so an insert while a shard is down fails (what a writer
must retry) instead of waiting in a queue; retried after the restart, with a replay of all of it,
nothing is lost or doubled.
"""

from __future__ import annotations

import datetime as dt
import subprocess

import pytest

from cachescope.store import ClickHouseStore, StoreError
from support.clusters import clickhouse_shards, gone, services, sigkill  # noqa: F401 (fixture)
from support.services import SERVICES, services_env

pytestmark = pytest.mark.services


def _run(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVICES), *args], capture_output=True, text=True, env=env)


def _events(groups: list[str], first: int, n: int) -> dict[str, list]:
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rows = [(g, i) for g in groups for i in range(first, first + n)]
    k = len(rows)
    return {
        "ts": [t0 + dt.timedelta(seconds=i) for _, i in rows], "site": ["S"] * k, "source": ["csv"] * k,
        "server": ["s1"] * k, "client": [""] * k, "vo": ["atlas"] * k, "path": [f"/f{i}" for _, i in rows],
        "file_id": [i for _, i in rows], "file_size": [100] * k, "bytes_read": [100] * k, "op": ["read"] * k,
        "tier": ["AOD"] * k, "cache_group": [g for g, _ in rows], "observed_hit_bytes": [None] * k,
        "observed_miss_bytes": [None] * k, "observed_bypass_bytes": [None] * k, "seq": [i for _, i in rows],
        "origin": ["host:/log"] * k,
    }


def test_two_shards_with_the_distributed_schema_survive_a_killed_shard(clickhouse_shards):
    env, e = clickhouse_shards
    pids = [int(p) for p in e["CLICKHOUSE_PIDS"].split(",")]
    ports = [int(p) for p in e["CLICKHOUSE_TCP_PORTS"].split(",")]
    assert len(pids) == len(ports) == 2 and e["CLICKHOUSE_SHARDS"] == "2"
    assert e["CLICKHOUSE_URL"] == f"clickhouse://127.0.0.1:{ports[0]}/cachescope?distributed_foreground_insert=1"
    local = [ClickHouseStore(f"clickhouse://127.0.0.1:{p}", database="cachescope") for p in ports]
    try:
        for s in local:  # the production schema on each server, and its memory bounded
            engines = dict(s.query("SELECT name, engine FROM system.tables WHERE database = 'cachescope'").rows)
            assert engines["access_events"] == "Distributed" and engines["access_events_local"] == "ReplacingMergeTree"
            assert engines["efficiency"] == "Distributed" and engines["pipeline_health"] == "Distributed"
            cap = s.query("SELECT value FROM system.server_settings WHERE name = 'max_server_memory_usage'").scalar()
            assert int(cap) == 1 << 30
            assert s.query("SELECT count() FROM system.clusters WHERE cluster = 'cachescope'").scalar() == 2

        groups = [f"group{i}" for i in range(8)]
        writer = ClickHouseStore(e["CLICKHOUSE_URL"])  # the URL the job writes to
        writer.insert("access_events", _events(groups, 0, 40))
        assert local[1].query("SELECT count() FROM access_events FINAL").scalar() == 320
        on_second = local[1].query("SELECT count() FROM access_events_local").scalar()
        assert 0 < on_second < 320, "both shards hold rows"

        sigkill(pids[1], "shard 2")
        with pytest.raises(StoreError):  # refused while shard 2 is down (shard 1's part may be written)
            writer.insert("access_events", _events(groups, 40, 40))

        e2 = services("start", "clickhouse", "--shards", "2", env=env)  # starts the dead shard again, on its ports and data
        assert e2["CLICKHOUSE_TCP_PORTS"] == e["CLICKHOUSE_TCP_PORTS"]
        new = [int(p) for p in e2["CLICKHOUSE_PIDS"].split(",")]
        assert new[0] == pids[0] and new[1] != pids[1]
        local[1].close()
        local[1] = ClickHouseStore(f"clickhouse://127.0.0.1:{ports[1]}", database="cachescope")
        assert local[1].query("SELECT count() FROM access_events_local FINAL").scalar() == on_second  # kept its data
        writer.insert("access_events", _events(groups, 40, 40))  # the retry
        writer.insert("access_events", _events(groups, 0, 80))  # and a replay of all of it
        for s in local:
            got = s.query("SELECT cache_group, count(), uniqExact(seq) FROM access_events FINAL GROUP BY cache_group "
                          "ORDER BY cache_group").rows
            assert got == [(g, 80, 80) for g in groups]
        writer.close()
    finally:
        for s in local:
            s.close()

    p = _run(env, "stop", "clickhouse")
    assert p.returncode == 0, p.stderr
    assert all(gone(p) for p in new)
    assert services_env("clickhouse", env) is None
