"""The local Kafka broker (scripts/services) takes a produce/consume round trip."""

import json

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.services


def test_produce_consume_round_trip(kafka, kafka_topic):
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    admin.create_topics([NewTopic(kafka_topic, num_partitions=2, replication_factor=1)])
    admin.close()

    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
    sent = [{"seq": i, "cache_group": f"g{i % 2}", "path": f"/store/data/f{i}.root"} for i in range(500)]
    for ev in sent:
        producer.send(kafka_topic, key=ev["cache_group"].encode(), value=json.dumps(ev).encode())
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(kafka_topic, bootstrap_servers=kafka.bootstrap, group_id=f"{kafka_topic}-reader",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = []
    while len(got) < len(sent):  # no time limit: a lost message hangs here, visibly
        for records in consumer.poll(timeout_ms=1000).values():
            got.extend(records)
    consumer.commit()
    consumer.close()

    assert sorted(json.loads(r.value)["seq"] for r in got) == list(range(500))
    # keyed by cache group: one group's messages stay in one partition, in order
    for g in ("g0", "g1"):
        recs = [r for r in got if r.key == g.encode()]
        assert len({r.partition for r in recs}) == 1
        assert [json.loads(r.value)["seq"] for r in recs] == sorted(json.loads(r.value)["seq"] for r in recs)
