"""Ship a Kafka topic of log records into the events topic, exactly once: dCache's billing topic.

dCache publishes its billing records as JSON to Kafka (`dcache.enable.kafka=true`, topic
`billing` by default): one record is one `dcache-json` "line". `TopicShipper` is a
consume-transform-produce loop: it consumes the records (read_committed, as a consumer group),
parses each with the format's `LineParser`, and commits the batched AccessEvents, the rejects
(located by topic, partition and offset) and the consumer group's offsets in one producer
transaction (`KafkaSink`, shared with the file shipper). A crash before the commit leaves the
offsets where they were, so the batch is consumed again; after it, the batch is neither
consumed nor sent again. Both topics must live on one Kafka cluster: a transaction cannot commit
offsets on another (mirror dCache's topic first).

An event's `origin` is its record's topic partition (`kafka:billing/3`) and its `seq` the
record's offset: derived, not counted, so a batch consumed again after an aborted transaction
gets the same identity without any counter in the transaction, identities stay unique across
partitions and shippers of one group (each partition has one owner at a time) and increase in
each partition's order, which is the order dCache wrote them in. Records that give no event
(skipped, rejected) leave a gap.
"""

from __future__ import annotations

import os
from typing import Callable

from cachescope.config import CachescopeConfig
from ingest.pipeline import LineParser, RejectRecord
from ingest.shipper import LINES_READ, KafkaSink, Location, parse_kafka_url

def record_origin(topic: str, partition: int) -> str:
    """The origin id of a Kafka topic partition (its offsets are the events' seq)."""
    return f"kafka:{topic}/{partition}"


class TopicShipper:
    def __init__(self, fmt: str, source: str, to: str, *, config: CachescopeConfig, site: str = "",
                 group_id: str | None = None, shipper_id: str | None = None,
                 dead_letter_topic: str | None = None, batch_events: int = 2500, linger_seconds: float = 1.0,
                 producer_config: dict | None = None, consumer_config: dict | None = None):
        from kafka import KafkaConsumer

        self.fmt, self.source = fmt, source
        self.source_bootstrap, self.source_topic = parse_kafka_url(source)
        to_topic = parse_kafka_url(to)[1]
        self.group_id = group_id or f"cachescope-shipper.{self.source_topic}.{to_topic}"
        self.id = shipper_id or f"{os.uname().nodename}:{self.source_topic}"
        self.batch_events = batch_events
        # the producer first: init_transactions aborts a crashed run's open transaction, so the
        # consumer then reads offsets that no pending transaction will still move
        self.sink = KafkaSink(to, shipper_id=self.id, fmt=fmt, dead_letter_topic=dead_letter_topic,
                              producer_config=producer_config)
        self._check_one_cluster()
        self.consumer = KafkaConsumer(
            bootstrap_servers=self.source_bootstrap, group_id=self.group_id, client_id=f"cachescope-shipper-{self.id}",
            # static membership: a restarted shipper takes its partitions back at once instead
            # of waiting out the dead incarnation's session (45 s)
            group_instance_id=self.id,
            isolation_level="read_committed", enable_auto_commit=False, auto_offset_reset="earliest",
            max_poll_records=batch_events,
            # one poll is one transaction: let the broker gather records (dCache's are ~1 KB)
            # for up to the linger rather than commit a transaction per trickle
            fetch_min_bytes=64 * 1024, fetch_max_wait_ms=max(1, int(linger_seconds * 1000)),
            **(consumer_config or {}))
        self.consumer.subscribe([self.source_topic])
        self._pending: list[RejectRecord] = []
        self.parser = LineParser(fmt, config=config, site=site, source_name=self.source_topic,
                                 on_reject=self._pending.append)
        self.committed: dict[int, int] = {}  # partition -> next offset, as this run committed it
        self.records = 0

    def _check_one_cluster(self) -> None:
        if self.source_bootstrap == self.sink.bootstrap:
            return
        from kafka.admin import KafkaAdminClient

        ids = []
        for bootstrap in (self.source_bootstrap, self.sink.bootstrap):
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                ids.append(admin.describe_cluster().get("cluster_id"))
            finally:
                admin.close()
        if ids[0] != ids[1]:
            raise ValueError(f"{self.source} and the events topic are on different Kafka clusters: exactly once "
                             "needs one (the offsets are committed in the producer's transaction)")

    def _transform(self, records: list) -> tuple[list, list[tuple[Location, RejectRecord]]]:
        """Events and located rejects of `records`, one parse per record (its seq is its own)."""
        parser, pending = self.parser, self._pending
        events: list = []
        rejects: list[tuple[Location, RejectRecord]] = []
        for r in records:
            where = {"topic": r.topic, "partition": r.partition, "offset": r.offset}
            text = r.value.decode("utf-8", "replace") if r.value else ""
            if not text.strip():  # the parser drops blank lines silently; a record is accounted for
                rejects.append((where, RejectRecord(r.offset, "empty record", text, skipped=True)))
                continue
            parser.enrich.origin = record_origin(r.topic, r.partition)
            parser.enrich.seq = r.offset
            parser.continue_at_line(r.offset - 1)  # a reject's line is the record's offset
            out = parser.parse_all([text])
            if len(out) > 1:  # one seq per offset: one event per record (xcache-reporter arrays hold more)
                pending.append(RejectRecord(r.offset, f"record holds {len(out)} accesses: one per record here", text))
                out = []
            events.extend(out)
            rejects.extend((where, rej) for rej in pending)
            pending.clear()
        return events, rejects

    def _ship(self, records: list) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        LINES_READ.labels(self.id).inc(len(records))
        events, rejects = self._transform(records)
        offsets = {TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.offset + 1, "", -1) for r in records}
        meta = self.consumer.group_metadata()  # generation and member: the broker fences a stale member
        self.sink.commit(events, rejects, lambda producer: producer.send_offsets_to_transaction(offsets, meta))
        for tp, om in offsets.items():
            self.committed[tp.partition] = om.offset
        self.records += len(records)

    def _end_offsets(self) -> dict | None:
        from kafka import TopicPartition

        parts = self.consumer.partitions_for_topic(self.source_topic)
        if not parts:
            return None
        return self.consumer.end_offsets([TopicPartition(self.source_topic, p) for p in parts])

    def _caught_up(self, end: dict) -> bool:
        from kafka.structs import MemberState

        if self.consumer.group_metadata().state != MemberState.STABLE:
            return False  # not joined yet, or rebalancing: the assignment is not ours to judge
        c = self.consumer
        return all(c.position(tp) >= end.get(tp, 0) for tp in c.assignment())

    def run(self, follow: bool = False, poll_seconds: float = 0.5, stop: Callable[[], bool] = lambda: False,
            max_records: int | None = None) -> dict[int, int]:
        """Ship until caught up with the end offsets at start (or, with follow, until stop()).
        Returns partition -> next offset committed by this run. A failed transaction is aborted
        and raised: a new run resumes at the committed offsets."""
        end = None if follow else self._end_offsets()
        if not follow and end is None:
            return self.committed  # no such topic (yet): nothing to catch up with
        shipped = 0
        while True:
            limit = self.batch_events if max_records is None else min(self.batch_events, max_records - shipped)
            polled = self.consumer.poll(timeout_ms=int(poll_seconds * 1000), max_records=limit)
            records = [r for tp in sorted(polled) for r in polled[tp]]
            if records:
                self._ship(records)
                shipped += len(records)
                if shipped == max_records:
                    return self.committed
            if (end is not None and self._caught_up(end)) or stop():
                return self.committed

    def close(self) -> None:
        self.consumer.close()
        self.sink.close()
