"""Event identity (cache_group, origin, seq): several log streams of one format feeding one cache
group never collapse into each other, on chDB (separate `replay` runs) and on the ClickHouse
server (shippers → Kafka → Flink). The logs are copies of one HTTP access log with one-second
timestamps, so every event of one copy has the same (ts, seq, source) as its twin in the others:
under the old key the store kept one of each.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cachescope import reads
from cachescope.config import load_config
from cachescope.store import open_store
from ingest.pipeline import LineParser, open_lines

CLI = Path(sys.executable).parent / "cachescope"


def http_log(tmp: Path, events: int = 3000) -> Path:
    out = tmp / "gen"
    subprocess.run([str(CLI), "generate", "--out", str(out), "-f", "http-access", "-n", str(events), "--days", "0.1",
                    "--seed", "5"], check=True, capture_output=True)
    logs = sorted(out.rglob("*.log")) or sorted(p for p in out.rglob("*") if p.is_file())
    return logs[0]


def copies(log: Path, tmp: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        p = tmp / f"server{i}" / "access.log"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(log.read_bytes())
        paths.append(p)
    return paths


def parsed(path: Path):
    with open_lines(path) as f:
        return LineParser("http-access", config=load_config(), site="SITE", source_name=str(path),
                          on_reject=lambda r: None).parse_all(f)


@pytest.mark.parametrize("servers", [2, 8])
def test_separate_replays_of_several_servers_keep_every_access(tmp_path, servers):
    logs = copies(http_log(tmp_path), tmp_path, servers)
    per_log = len(parsed(logs[0]))
    assert per_log > 1000
    store = tmp_path / "store"
    for log in logs:  # one run per server's log, as a backfill would do it
        out = subprocess.run([str(CLI), "replay", "--format", "http-access", "--site", "SITE", "--store", str(store),
                              str(log)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    again = subprocess.run([str(CLI), "replay", "--format", "http-access", "--site", "SITE", "--store", str(store),
                            str(logs[0])], capture_output=True, text=True)  # a repeat changes nothing
    assert again.returncode == 0, again.stderr
    with open_store(store_dir=store) as st:
        assert st.query("SELECT count() FROM access_events FINAL").scalar() == servers * per_log
        assert st.query("SELECT uniqExact(origin) FROM access_events").scalar() == servers
        groups = reads.cache_groups(st)
        first, last = groups["first_access"].min(), groups["last_access"].max()
        import datetime as dt

        got = reads.whatif_accesses(st, first.to_pydatetime(), last.to_pydatetime() + dt.timedelta(seconds=1))
    assert len(got) == servers * per_log
    # same-second accesses keep file order: one origin's rows, read in (ts, origin, seq) order, are
    # its log's events in their order (stable by time)
    mine = got[got["origin"] == f"file:{__import__('socket').gethostname()}:{logs[0]}"]
    want = sorted(parsed(logs[0]), key=lambda e: e.ts)
    assert mine["seq"].tolist() == [e.seq for e in want]
    assert mine["file_id"].tolist() == [e.file_id for e in want]
    seconds = mine["ts_us"] // 1_000_000
    assert (seconds.value_counts() > 1).any(), "the log must have same-second accesses for this test to mean something"


@pytest.mark.services
@pytest.mark.parametrize("shippers", [2, 8])
def test_several_shippers_into_one_group_through_flink_store_every_event_once(
        kafka, clickhouse, flink_jars, kafka_topic, tmp_path, request, shippers):
    from cachescope.store import ClickHouseStore, migrations
    from ingest.shipper import Shipper
    from support.services import unique_name
    from test_flink_job import job_log, kill, start_job

    logs = copies(http_log(tmp_path, 2000), tmp_path, shippers)
    lines = logs[0].read_text().splitlines(keepends=True)
    per_log = len(parsed(logs[0]))
    name = unique_name(request, "identity")
    db = ClickHouseStore(clickhouse.url, database=name)
    migrations.migrate(db, events_ttl_days=0)

    def ship(log: Path) -> None:
        sh = Shipper("http-access", str(log), f"kafka://{kafka.bootstrap}/{kafka_topic}",
                     config=load_config(), site="SITE", batch_events=300)
        try:
            sh.run()
        finally:
            sh.close()

    try:
        # the first shipper stops mid-file and is restarted when the rest is written: it resumes
        # from its committed position, neither losing nor repeating a line
        logs[0].write_text("".join(lines[: len(lines) // 2]))
        ship(logs[0])
        with logs[0].open("a") as f:
            f.write("".join(lines[len(lines) // 2:]))
        for log in logs:
            ship(log)
        job = start_job(tmp_path, kafka, clickhouse, kafka_topic, name, "--bounded")
        try:
            assert job.wait(timeout=900) == 0, job_log(tmp_path)
        finally:
            kill(job)
        by_origin = dict(db.query("SELECT origin, count() FROM access_events FINAL GROUP BY origin").rows)
        assert sorted(by_origin.values()) == [per_log] * shippers, by_origin
        assert db.query("SELECT count() FROM access_events").scalar() == shippers * per_log  # nothing sent twice
        assert db.query("SELECT uniqExact(origin) FROM access_events").scalar() == shippers
        eff = db.query("SELECT sum(requests) FROM efficiency FINAL WHERE policy = 'lru' AND size_bytes = "
                       "(SELECT min(size_bytes) FROM efficiency)").scalar()
        # the shadow caches count every read except those that arrived after their window closed:
        # the streams are shipped one after the other, so later copies are partly late (side output)
        late = db.query("SELECT max(value) FROM pipeline_health WHERE metric = 'late_events'").scalar()
        reads_per_log = sum(1 for e in parsed(logs[1]) if e.op == "read")
        assert eff + late == shippers * reads_per_log
    finally:
        db.command(f"DROP DATABASE IF EXISTS {name}")
        db.close()
