"""Event identity on the ClickHouse server: several shippers → Kafka → Flink into one cache group store
every event once (unit/ingest/test_event_identity.py: the same on chDB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachescope.config import load_config

# the helpers of the same tests' chDB half (conftest.py makes every test folder importable)
from test_event_identity import copies, http_log, parsed


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
            assert job.wait() == 0, job_log(tmp_path)  # a bounded job: its exit is the event
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
