"""The pipeline monitor against the real broker and both stores: consumer lag per partition of a
group that is behind (and catches up), and the shippers' parse health, counted in their Kafka
transactions, into pipeline_health."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import uuid
from pathlib import Path

import orjson
import pytest

from cachescope import reads
from cachescope.store import migrations
from cachescope.config import load_config
from ingest.health import health_record, health_topic
from ingest.pipeline import RejectRecord
from ingest.shipper import Shipper, _by_reason, _split_reasons
from runners.monitor import PipelineMonitor, shipper_health_metrics

CLI = str(Path(sys.executable).parent / "cachescope")
ALL_TIME = (dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc))


def test_a_health_record_counts_rejects_and_skips_by_reason():
    rejects = [RejectRecord(1, "bad field: size", ""), RejectRecord(2, "bad field: ts", ""),
               RejectRecord(3, "door request", "", skipped=True)]
    pairs = [({"file": "f"}, r) for r in rejects]
    doc = orjson.loads(health_record("s1", "csv", 10, 7, *_split_reasons(pairs, _by_reason(pairs))))
    assert (doc["lines"], doc["events"], doc["rejected"], doc["skipped"]) == (10, 7, {"bad field": 2},
                                                                                {"door request": 1})
    m = shipper_health_metrics(doc)
    assert m == {"lines": 10, "events": 7, "rejected": 2, "rejected:bad field": 2, "skipped": 1,
                 "skipped:door request": 1}


def _produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for p in range(partitions):
        for i in range(per_partition):
            producer.send(topic, f"{p}:{i}".encode(), partition=p)
    producer.flush()
    producer.close()


def _commit(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    c.close()


@pytest.mark.services
def test_lag_of_a_group_that_is_behind_then_catches_up(kafka, store):
    topic, group = f"lag-{uuid.uuid4().hex[:8]}", f"grp-{uuid.uuid4().hex[:8]}"
    _produce(kafka.bootstrap, topic, 50, 2)
    _commit(kafka.bootstrap, topic, group, {0: 20})  # partition 1: nothing committed yet
    migrations.migrate(store)
    mon = PipelineMonitor(kafka.bootstrap, store, {group: [topic]}, every_s=3600)
    try:
        first = {s.partition: (s.committed_offset, s.end_offset, s.lag) for s in mon.tick()}
        assert first == {0: (20, 50, 30), 1: (-1, 50, 50)}
        _commit(kafka.bootstrap, topic, group, {0: 50, 1: 45})
        second = {s.partition: s.lag for s in mon.tick()}
        assert second == {0: 0, 1: 5}
    finally:
        mon.close()
    rows = store.query_frame("SELECT partition, committed_offset, lag FROM consumer_lag "
                             "WHERE consumer_group = {g:String} ORDER BY ts, partition", {"g": group})
    assert rows.values.tolist() == [[0, 20, 30], [1, -1, 50], [0, 50, 0], [1, 45, 5]]
    df = reads.consumer_lag(store, *ALL_TIME, 3600, consumer_groups=[group])  # the largest of each bucket
    assert set(df["topic"]) == {topic} and df.groupby("partition")["lag"].max().to_dict() == {0: 30, 1: 50}
    assert len(reads.consumer_lag(store, *ALL_TIME, 60, consumer_groups=["no-such-group"])) == 0


@pytest.mark.services
def test_shipper_parse_health_reaches_the_health_table(kafka, store, tmp_path):
    log = tmp_path / "access.csv"
    with log.open("w") as f:
        f.write("timestamp,obj_id,obj_size,tier,path\n")
        for i in range(300):
            f.write(f"{1_700_000_000 + i},{i % 97 + 1},{(i % 13 + 1) * 10**8},AOD,/atlas/f{i % 97}\n")
            if i in (100, 200):
                f.write("this,is,not,a,trace row\n")
    topic = f"health-{uuid.uuid4().hex[:8]}"
    sh = Shipper("csv", str(log), f"kafka://{kafka.bootstrap}/{topic}", config=load_config(), shipper_id=topic,
                 batch_events=120)
    try:
        sh.run()
    finally:
        sh.close()
    migrations.migrate(store)
    mon = PipelineMonitor(kafka.bootstrap, store, {}, [health_topic(topic)], every_s=3600)
    try:
        assert mon.forward_health(timeout_ms=2000) >= 3  # one record per transaction (3 batches)
        assert mon.forward_health(timeout_ms=500) == 0  # committed: not forwarded twice
    finally:
        mon.close()
    df = reads.parse_health(store, *ALL_TIME, 86400)
    mine = df[(df["component"] == "shipper") & (df["cache_group"] == topic)]
    got = mine.groupby("metric")["value"].sum().to_dict()
    assert got["lines"] == 303 and got["events"] == 300 and got["rejected"] == 2
    assert sum(v for k, v in got.items() if k.startswith("rejected:")) == 2


@pytest.mark.services
def test_the_monitor_command_prints_and_writes_the_lag(kafka, clickhouse):
    topic, group = f"cmd-{uuid.uuid4().hex[:8]}", f"grp-{uuid.uuid4().hex[:8]}"
    _produce(kafka.bootstrap, topic, 10, 1)
    _commit(kafka.bootstrap, topic, group, {0: 4})
    db = f"mon_{uuid.uuid4().hex[:8]}"
    subprocess.run([CLI, "migrate", "--clickhouse", clickhouse.url, "--database", db], check=True,
                   capture_output=True)
    out = subprocess.run([CLI, "monitor", "--bootstrap", kafka.bootstrap, "--clickhouse", clickhouse.url,
                          "--database", db, "--group", group, "--topic", topic, "--once"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\t")[-1].strip() == "lag 6"
    bad = subprocess.run([CLI, "monitor", "--bootstrap", "127.0.0.1:1", "--clickhouse", clickhouse.url, "--once"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_the_monitor_command_refuses_a_bad_period_before_connecting():
    out = subprocess.run([CLI, "monitor", "--bootstrap", "127.0.0.1:1", "--clickhouse", "clickhouse://127.0.0.1:1",
                          "--every", "soon"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--every" in out.stderr
