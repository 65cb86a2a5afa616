"""The pipeline monitor: Kafka consumer lag and the shippers' parse health, into ClickHouse.

Runs beside the Flink job: `runners/flink.py` starts it as a thread of the job's driver
(`--monitor-every 15s`, `0` turns it off), and `cachescope monitor --bootstrap … --clickhouse …`
runs it on its own (a sidecar when the job was submitted to a cluster, whose driver exits).
Every tick it writes:

* `consumer_lag`: for each watched consumer group (the Flink job's, whose Kafka source commits
  its offsets on every checkpoint), per topic partition, the committed offset, the end offset and
  their difference. A group that committed nothing on a partition counts from the log start. On
  a topic written in transactions (the shippers'), a group at rest trails the end by its
  partitions' last commit markers (1 each): markers are offsets no record holds.
* `pipeline_health` rows from the shippers' health records (`<events topic>.health`, one per
  Kafka transaction, written in the same transaction as the events, so they count exactly what
  was committed): component `shipper`, cache group = the shipper's id, metrics `lines`, `events`,
  `rejected:<reason>`, `skipped:<reason>`, `truncated` (the file was truncated in place and read
  again from its start), stamped with the record's time. The monitor's own
  consumer group commits after the rows are written (at least once: a crash in between writes a
  tick's rows twice; `reads.parse_health` sums them).

Failures (a broker or server away) are reported on stderr, one line, and retried next tick: the
monitor never stops the job.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import orjson

from cachescope.core.health import health_rows
from cachescope.store import tables

HEALTH_SUFFIX = ".health"  # the shippers' health topic: the events topic + this
MONITOR_GROUP = "cachescope-monitor"


def health_group(topics) -> str:
    """The consumer group that forwards these health topics: one per set of topics, so monitors
    of other pipelines (or a killed one still counted as a member) never hold up its rebalance,
    while a restarted monitor of the same topics resumes where its predecessor committed."""
    import xxhash

    return f"{MONITOR_GROUP}-{xxhash.xxh3_64_hexdigest(chr(0).join(sorted(topics)).encode())[:12]}"


@dataclass
class LagSample:
    consumer_group: str
    topic: str
    partition: int
    committed_offset: int  # -1: nothing committed
    end_offset: int
    lag: int


def lag_rows(samples: list[LagSample], ts_us: int) -> dict[str, np.ndarray]:
    n = len(samples)
    return {
        "ts": np.full(n, ts_us, dtype=np.int64).astype("datetime64[us]"),
        "consumer_group": np.array([s.consumer_group for s in samples], dtype=object),
        "topic": np.array([s.topic for s in samples], dtype=object),
        "partition": np.array([s.partition for s in samples], dtype=np.uint32),
        "committed_offset": np.array([s.committed_offset for s in samples], dtype=np.int64),
        "end_offset": np.array([s.end_offset for s in samples], dtype=np.int64),
        "lag": np.array([s.lag for s in samples], dtype=np.int64),
    }


def shipper_health_metrics(doc: dict) -> Counter:
    """A shipper's health record → its pipeline_health metrics."""
    m: Counter = Counter({"lines": int(doc.get("lines", 0)), "events": int(doc.get("events", 0))})
    for kind in ("rejected", "skipped"):
        for reason, n in (doc.get(kind) or {}).items():
            m[kind] += int(n)
            m[f"{kind}:{reason}"] += int(n)
    if doc.get("truncated"):  # the followed file was truncated in place and read again from its start
        m["truncated"] += int(doc["truncated"])
    for metric, n in (doc.get("counts") or {}).items():  # e.g. collect's lost_datagrams
        m[str(metric)] += int(n)
    return m


@dataclass
class PipelineMonitor:
    bootstrap: str
    store: object  # cachescope.store.Store
    #: consumer group → the topics whose lag it reports
    groups: dict[str, list[str]]
    #: shippers' health topics to forward into pipeline_health (empty: none)
    health_topics: list[str] = field(default_factory=list)
    every_s: float = 15.0
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self):
        from kafka import KafkaAdminClient, KafkaConsumer

        self.admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="cachescope-monitor")
        self.offsets = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                     client_id="cachescope-monitor-offsets", enable_auto_commit=False)
        self.health = None
        if self.health_topics:
            self.health = KafkaConsumer(*self.health_topics, bootstrap_servers=self.bootstrap,
                                        group_id=health_group(self.health_topics),
                                        client_id="cachescope-monitor-health",
                                        isolation_level="read_committed", enable_auto_commit=False,
                                        auto_offset_reset="earliest")

    # ------------------------------------------------------------------ one tick

    def lag(self) -> list[LagSample]:
        from kafka import TopicPartition

        samples = []
        for group, topics in self.groups.items():
            offsets = self.admin.list_group_offsets({group: None}).get(group) or {}
            committed = {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}
            for topic in topics:
                parts = self.offsets.partitions_for_topic(topic) or set()
                tps = [TopicPartition(topic, p) for p in sorted(parts)]
                if not tps:
                    continue
                ends = self.offsets.end_offsets(tps)
                starts = self.offsets.beginning_offsets(tps)
                for tp in tps:
                    c = committed.get((topic, tp.partition))
                    if c is None or c < 0:  # nothing committed: all that the log still holds is behind
                        samples.append(LagSample(group, topic, tp.partition, -1, ends[tp], ends[tp] - starts[tp]))
                    else:
                        samples.append(LagSample(group, topic, tp.partition, c, ends[tp], max(0, ends[tp] - c)))
        return samples

    def forward_health(self, timeout_ms: int = 200) -> int:
        """Shippers' health records → pipeline_health rows; returns how many records."""
        if self.health is None:
            return 0
        n = 0
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            polled = self.health.poll(timeout_ms=timeout_ms, max_records=5000)
            records = [r for batch in polled.values() for r in batch]
            # an empty poll is not the end while the group is still joining or fetching (a busy
            # broker): stop at the topics' ends, or when the wait is over
            if not records and (self._at_end() or time.monotonic() >= deadline):
                return n
            if not records:
                continue
            parts = []
            for r in records:
                try:
                    doc = orjson.loads(r.value)
                except orjson.JSONDecodeError:
                    continue
                parts.append(health_rows("shipper", str(doc.get("shipper", "")), shipper_health_metrics(doc),
                                         ts_us=int(r.timestamp) * 1000))
            if parts:
                self.store.insert(tables.PIPELINE_HEALTH, {k: np.concatenate([p[k] for p in parts]) for k in parts[0]})
            self.health.commit()
            n += len(records)

    def _at_end(self) -> bool:
        """Whether the health consumer has read everything committed on its partitions."""
        assigned = self.health.assignment()
        if not assigned:
            return False
        ends = self.health.end_offsets(list(assigned))
        return all(self.health.position(tp) >= ends[tp] for tp in assigned)

    def tick(self, health_wait_ms: int = 1000) -> list[LagSample]:
        samples = self.lag()
        if samples:
            self.store.insert(tables.CONSUMER_LAG, lag_rows(samples, int(time.time() * 1e6)))
        self.forward_health(health_wait_ms)
        return samples

    # ------------------------------------------------------------------ background

    def start(self) -> "PipelineMonitor":
        self._thread = threading.Thread(target=self._run, name="cachescope-monitor", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as e:  # a broker or server away: say so, try again next tick
                print(f"cachescope monitor: {type(e).__name__}: {e}", file=sys.stderr)
            self._stop.wait(self.every_s)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            try:  # a last tick: what the shippers committed since the previous one (a bounded job ends in seconds)
                self.tick(health_wait_ms=5000)
            except Exception as e:
                print(f"cachescope monitor: {type(e).__name__}: {e}", file=sys.stderr)
        for c in (self.offsets, self.health):
            if c is not None:
                c.close()
        self.admin.close()
