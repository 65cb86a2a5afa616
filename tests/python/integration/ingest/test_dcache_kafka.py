"""The topic shipper against a real Kafka broker: dCache's billing topic in, every record's event
exactly once out (across a clean stop and a SIGKILL), rejects located by partition and offset."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from cachescope.config import load_config
from support.data import fixture_lines
from ingest.generate import make_workload, render
from ingest.kafka_source import TopicShipper
from ingest.pipeline import LineParser
from support.services import topic_items

pytestmark = pytest.mark.services
CLI = str(Path(sys.executable).parent / "cachescope")
MALFORMED = '{"version":"1.0","msgType":"transfer","date":"2024-03-11T10:15:30.250+01:00","isWrite":"sideways"'


def make_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> list[tuple[int, int, str]]:
    """Send `values` round-robin over the partitions, as dCache would (plain JSON values, no
    transactions). Returns (partition, offset, value) of each."""
    from kafka import KafkaProducer

    with KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        futures = [(p.send(topic, value=v.encode(), partition=i % partitions), v) for i, v in enumerate(values)]
        p.flush()
        out = []
        for fut, v in futures:
            md = fut.get(timeout=30)
            out.append((md.partition, md.offset, v))
        return out


def expected_events(topic: str, records: list[tuple[int, int, str]]) -> dict[tuple[str, int], dict]:
    """(origin, seq) -> event of every record that is an access, the record parsed on its own; its
    identity is where it is: origin kafka:TOPIC/PARTITION, seq its offset."""
    parser = LineParser("dcache-json", config=load_config(), on_reject=lambda r: None)
    out = {}
    for partition, offset, value in records:
        parser.enrich.origin = f"kafka:{topic}/{partition}"
        parser.enrich.seq = offset
        for e in parser.parse_all([value]):
            out[(parser.enrich.origin, offset)] = msgspec.to_builtins(e)
    return out


def shipped(bootstrap: str, topic: str) -> list[dict]:
    return sorted(topic_items(bootstrap, topic), key=lambda e: (e["origin"], e["seq"]))


def committed_records(bootstrap: str, group: str) -> int:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None}).get(group, {})
        return sum(om.offset for om in offsets.values() if om.offset > 0)
    finally:
        admin.close()


def test_billing_topic_to_events_once_rejects_by_partition_and_offset(kafka, kafka_topic):
    billing, events = kafka_topic + ".billing", kafka_topic + ".events"
    make_topic(kafka.bootstrap, billing, partitions=2)
    lines = fixture_lines("dcache_json.jsonl")
    records = produce(kafka.bootstrap, billing, lines[:5] + [MALFORMED] + lines[5:], partitions=2)
    want = expected_events(billing, records)
    assert {e["op"] for e in want.values()} == {"read", "write", "delete"}
    args = [CLI, "ship", "--format", "dcache-json", "--from", f"kafka://{kafka.bootstrap}/{billing}",
            "--to", f"kafka://{kafka.bootstrap}/{events}", "--shipper-id", kafka_topic, "--no-follow",
            "--linger", "0.2"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"shipped {len(records)} records" in p.stderr

    assert shipped(kafka.bootstrap, events) == [want[s] for s in sorted(want)]
    rejects = topic_items(kafka.bootstrap, events + ".rejects")
    # only the malformed record is a dead letter: skipped ones (door requests …) are counted by
    # reason in the shipper's metrics, not sent one message each
    (bad,) = rejects
    partition, offset, _ = records[5]
    assert bad == {"shipper": kafka_topic, "format": "dcache-json", "topic": billing, "partition": partition,
                   "offset": offset, "line": offset, "reason": "not valid JSON: Input data was truncated",
                   "text": MALFORMED, "skipped": False}
    assert len(want) < len(records) - 1  # there were skipped records, and none was sent

    # caught up: a second run finds nothing new and sends nothing again
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "shipped 0 records" in p.stderr
    assert len(topic_items(kafka.bootstrap, events)) == len(want)
    assert len(topic_items(kafka.bootstrap, events + ".rejects")) == len(rejects)


def generated(n: int, seed: int) -> list[str]:
    return [line for _, _, _, line in render("dcache-json", make_workload(n, days=1, seed=seed))]


def test_stop_part_way_produce_more_and_resume(kafka, kafka_topic):
    billing, events = kafka_topic + ".billing", kafka_topic + ".events"
    make_topic(kafka.bootstrap, billing, partitions=2)
    lines = generated(3000, seed=3)
    records = produce(kafka.bootstrap, billing, lines[:2000], partitions=2)

    def shipper() -> TopicShipper:
        return TopicShipper("dcache-json", f"kafka://{kafka.bootstrap}/{billing}", f"kafka://{kafka.bootstrap}/{events}",
                            config=load_config(), shipper_id=kafka_topic, batch_events=300, linger_seconds=0.2)

    sh = shipper()
    try:
        sh.run(max_records=700)
        assert sh.records == 700
    finally:
        sh.close()
    records += produce(kafka.bootstrap, billing, lines[2000:], partitions=2)
    sh = shipper()
    try:
        sh.run()
        assert sh.records == 3000 - 700  # resumed where the first run's transactions ended
    finally:
        sh.close()
    want = expected_events(billing, records)
    assert shipped(kafka.bootstrap, events) == [want[s] for s in sorted(want)]


def test_sigkill_mid_stream_and_restart_sends_every_event_exactly_once(kafka, kafka_topic):
    billing, events = kafka_topic + ".billing", kafka_topic + ".events"
    make_topic(kafka.bootstrap, billing, partitions=2)
    lines = generated(24_000, seed=5)
    records = produce(kafka.bootstrap, billing, lines[:20_000], partitions=2)
    group = "dcache-" + kafka_topic
    args = [CLI, "ship", "--format", "dcache-json", "--from", f"kafka://{kafka.bootstrap}/{billing}",
            "--to", f"kafka://{kafka.bootstrap}/{events}", "--shipper-id", kafka_topic, "--group-id", group,
            "--batch", "200", "--linger", "0.2"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # follows: runs until killed
    try:
        while p.poll() is None and committed_records(kafka.bootstrap, group) < 3000:  # no time limit: an event
            time.sleep(0.1)
        assert p.poll() is None, "the shipper exited on its own"
        killed_at = committed_records(kafka.bootstrap, group)
        assert 3000 <= killed_at < 20_000, "the shipper was not killed mid-stream: use more records"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    records += produce(kafka.bootstrap, billing, lines[20_000:], partitions=2)
    done = subprocess.run(args + ["--no-follow"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    want = expected_events(billing, records)
    got = shipped(kafka.bootstrap, events)
    ids = [(e["origin"], e["seq"]) for e in got]
    assert len(ids) == len(set(ids))  # none twice
    assert got == [want[s] for s in sorted(want)]  # none lost, each as parsed
