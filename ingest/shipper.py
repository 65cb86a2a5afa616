"""Ship log lines into Kafka as batched AccessEvent messages, exactly once.

A shipper follows one log file (like `tail -F`: growth, rotation, truncation), parses each line
with the format's `LineParser`, and sends per-cache-group batches to the events topic
(`{"cache_group": G, "events": [...]}`), malformed lines with their reason to a dead-letter topic;
well-formed lines that are not accesses (skipped: door requests, failed transfers) are counted
by reason (`cachescope_shipper_rejects{reason}`), not sent.

Exactly once across restarts: each batch is one Kafka transaction holding the event messages,
the dead-letter messages and a record of the shipper's read position (file identity, byte
offset, line number, next seq) in a compacted state topic. After a crash the shipper resumes from
the position of the last committed transaction, so a line is neither lost nor sent twice
(consumers read with isolation.level=read_committed). The same position is mirrored to a local
state file for operators; Kafka's copy wins when they disagree (a crash between commit and file
write).

`KafkaSink` is the transactional side both shippers share: this file shipper and the topic
shipper of `ingest/kafka_source.py` (dCache's billing topic), which keeps its position as
consumer-group offsets inside the same transaction instead of a state-topic record.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence
from urllib.parse import urlparse

import msgspec
import orjson

from ingest.health import health_record, health_topic
from prometheus_client import Counter

from cachescope.config import CachescopeConfig
from cachescope.core.messages import encode_batch
from ingest.pipeline import LineParser, ParseStats, RejectRecord, file_origin

LINES_READ = Counter("cachescope_shipper_lines_read", "log lines read", ["shipper"])
EVENTS_SENT = Counter("cachescope_shipper_events_sent", "events committed to Kafka", ["shipper"])
REJECTS = Counter("cachescope_shipper_rejects", "lines rejected or skipped, by reason", ["shipper", "reason"])
BATCHES = Counter("cachescope_shipper_transactions", "Kafka transactions committed", ["shipper"])


def parse_kafka_url(url: str) -> tuple[str, str]:
    """kafka://host:port[,host:port]/topic → (bootstrap, topic)."""
    u = urlparse(url)
    topic = u.path.lstrip("/")
    if u.scheme != "kafka" or not u.netloc or not topic:
        raise ValueError(f"{url!r} is not kafka://HOST:PORT/TOPIC")
    return u.netloc, topic


def ensure_topics(bootstrap: str, topics: list) -> None:
    """Create the `NewTopic`s that do not exist yet (another shipper may create them at once)."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        existing = set(admin.list_topics())
        missing = [t for t in topics if t.name not in existing]
        if missing:
            try:
                admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


Location = dict  # where a rejected line was: {"file": path} or {"topic", "partition", "offset"}


#: below Kafka's default message.max.bytes (1 MB): a batch of long paths is split in halves
MAX_MESSAGE_BYTES = 900_000


def _messages(group: str, events: list) -> list[bytes]:
    message = encode_batch(group, events)
    if len(message) <= MAX_MESSAGE_BYTES or len(events) == 1:
        return [message]
    half = len(events) // 2
    return _messages(group, events[:half]) + _messages(group, events[half:])


class KafkaSink:
    """The events and dead-letter topics, written one transaction per batch.

    `commit` sends a batch's events (one message per cache group, keyed by it: a cache group's
    events stay in one partition, in order), its rejects, and whatever `mark` adds to the same
    transaction (the shipper's read position), all or nothing.
    """

    def __init__(self, to: str, *, shipper_id: str, fmt: str, dead_letter_topic: str | None = None,
                 extra_topics: Sequence = (), producer_config: dict | None = None):
        from kafka import KafkaProducer
        from kafka.admin import NewTopic

        self.bootstrap, self.topic = parse_kafka_url(to)
        self.dead_letter = dead_letter_topic or self.topic + ".rejects"
        self.id, self.fmt = shipper_id, fmt
        self.health_topic = health_topic(self.topic)  # parse health, one record per transaction
        ensure_topics(self.bootstrap, [*extra_topics, NewTopic(self.topic, 1, 1), NewTopic(self.dead_letter, 1, 1),
                                       NewTopic(self.health_topic, 1, 1)])
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, transactional_id=f"cachescope-shipper-{self.id}",
            enable_idempotence=True, acks="all", linger_ms=20, **(producer_config or {}))
        # fences a previous incarnation of this shipper and aborts its open transaction
        self.producer.init_transactions()

    def commit(self, events: list, rejects: Sequence[tuple[Location, RejectRecord]],
               mark: Callable[[object], None], lines: int | None = None) -> None:
        """One transaction: events by cache group, rejects, then mark(producer). Raises (after
        aborting) when the transaction fails: nothing of it is visible then."""
        by_group: dict[str, list] = {}
        for e in events:
            by_group.setdefault(e.cache_group, []).append(e)
        self.producer.begin_transaction()
        try:
            for group, evs in by_group.items():
                for message in _messages(group, evs):
                    self.producer.send(self.topic, key=group.encode(), value=message)
            for where, r in rejects:
                # well-formed lines that are not accesses (door requests, failed transfers: half
                # of a dCache billing log) are only counted, by reason; malformed ones go here
                if r.skipped:
                    continue
                doc = {"shipper": self.id, "format": self.fmt, **where, **msgspec.to_builtins(r)}
                self.producer.send(self.dead_letter, key=self.id.encode(), value=orjson.dumps(doc))
            self.producer.send(self.health_topic, key=self.id.encode(), value=health_record(
                self.id, self.fmt, len(events) + len(rejects) if lines is None else lines, len(events),
                (r for _, r in rejects)))
            mark(self.producer)
            self.producer.commit_transaction()
        except Exception:
            self.producer.abort_transaction()
            raise
        EVENTS_SENT.labels(self.id).inc(len(events))
        BATCHES.labels(self.id).inc()
        # one counter update per reason and transaction (a labels() lookup per line cost 8 %)
        by_reason: dict[str, int] = {}
        for _, r in rejects:
            reason = r.reason.split(":")[0][:60]
            by_reason[reason] = by_reason.get(reason, 0) + 1
        for reason, n in by_reason.items():
            REJECTS.labels(self.id, reason).inc(n)

    def close(self) -> None:
        self.producer.close()


@dataclass
class Position:
    """Where a shipper is in its input: enough to resume at the next unsent line."""

    path: str = ""
    inode: int = 0
    offset: int = 0  # bytes of the current file consumed (whole lines only)
    line: int = 0  # lines of the current file consumed
    seq: int = 0  # next seq number to give an event

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> "Position":
        return cls(**orjson.loads(data))


class FileFollower:
    """Whole lines of a file from a byte offset; follows growth, rotation and truncation."""

    def __init__(self, path: str | Path, pos: Position):
        self.path = str(path)
        self.pos = pos
        self.fh = None
        self._open(resume=True)

    def _open(self, resume: bool) -> bool:
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return False
        st = os.fstat(fh.fileno())
        if resume and self.pos.inode == st.st_ino and self.pos.offset <= st.st_size:
            fh.seek(self.pos.offset)
        else:  # a new file (first start, or rotated while we were away)
            self.pos.inode, self.pos.offset, self.pos.line = st.st_ino, 0, 0
        self.pos.path = self.path
        if self.fh:
            self.fh.close()
        self.fh = fh
        return True

    def lines(self) -> Iterator[tuple[str, int]]:
        """(line, byte length) of every complete line available now."""
        if self.fh is None and not self._open(resume=True):
            return
        while True:
            chunk = self.fh.readline()
            if not chunk:
                break
            if not chunk.endswith(b"\n"):
                # a partial last line: leave it for the next poll
                self.fh.seek(-len(chunk), os.SEEK_CUR)
                break
            yield chunk.decode("utf-8", "replace"), len(chunk)
        # rotation: the path names another file now; finish ours first (done above), then switch
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        if st.st_ino != self.pos.inode:
            self._open(resume=False)
        elif st.st_size < self.fh.tell():  # truncated in place (copytruncate)
            self.fh.seek(0)
            self.pos.offset, self.pos.line = 0, 0

    def close(self) -> None:
        if self.fh:
            self.fh.close()


class Shipper:
    def __init__(self, fmt: str, source: str, to: str, *, config: CachescopeConfig, site: str = "",
                 shipper_id: str | None = None, state_file: str | None = None,
                 dead_letter_topic: str | None = None, state_topic: str = "cachescope.shipper-state",
                 batch_events: int = 2500, linger_seconds: float = 1.0, producer_config: dict | None = None,
                 origin: str | None = None):
        from kafka.admin import NewTopic

        self.fmt, self.source, self.config, self.site = fmt, source, config, site
        self.origin = origin or file_origin(source)
        self.state_topic = state_topic
        self.id = shipper_id or f"{os.uname().nodename}:{os.path.abspath(source)}"
        self.state_file = Path(state_file) if state_file else None
        self.batch_events, self.linger = batch_events, linger_seconds
        self.sink = KafkaSink(to, shipper_id=self.id, fmt=fmt, dead_letter_topic=dead_letter_topic,
                              extra_topics=[NewTopic(state_topic, 1, 1, topic_configs={"cleanup.policy": "compact"})],
                              producer_config=producer_config)
        self.bootstrap, self.topic, self.dead_letter = self.sink.bootstrap, self.sink.topic, self.sink.dead_letter
        self.pos = self._load_position()

    # ---------------------------------------------------------------- state

    def _load_position(self) -> Position:
        """The committed position from Kafka, or the state file, whichever is further."""
        from kafka import KafkaConsumer, TopicPartition

        committed = None
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, isolation_level="read_committed",
                                 enable_auto_commit=False, consumer_timeout_ms=2000)
        try:
            tp = TopicPartition(self.state_topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]
            key = self.id.encode()
            while consumer.position(tp) < end:
                for msg in consumer.poll(timeout_ms=1000).get(tp, []):
                    if msg.key == key and msg.value:
                        committed = Position.from_json(msg.value)
        finally:
            consumer.close()
        local = None
        if self.state_file and self.state_file.exists():
            local = Position.from_json(self.state_file.read_bytes())
        candidates = [p for p in (committed, local) if p is not None]
        return max(candidates, key=lambda p: p.seq) if candidates else Position()

    def _save_local(self) -> None:
        if self.state_file:
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_bytes(self.pos.to_json())
            os.replace(tmp, self.state_file)

    # ---------------------------------------------------------------- shipping

    def _commit(self, events: list, rejects: list[RejectRecord], pos: Position) -> None:
        """One transaction: events by cache group, rejects, and the position after them."""
        key = self.id.encode()
        self.sink.commit(events, [({"file": pos.path}, r) for r in rejects],
                         lambda producer: producer.send(self.state_topic, key=key, value=pos.to_json()),
                         lines=pos.line - self.pos.line if (pos.path, pos.inode) == (self.pos.path, self.pos.inode) else None)
        self.pos = pos
        self._save_local()

    def run(self, follow: bool = False, poll_seconds: float = 0.5, stop: Callable[[], bool] = lambda: False,
            max_lines: int | None = None) -> Position:
        """Ship until the end of the file (or, with follow, until stop()). Returns the position.

        Transaction N commits on a thread of its own while batch N+1 is read and parsed (a
        commit waits ~30 ms on the broker, as long as parsing a batch): transactions stay one at
        a time and in order, and a failed one raises here before the next begins, so a restart
        resumes from the last committed position as before."""
        from concurrent.futures import ThreadPoolExecutor

        follower = FileFollower(self.source, Position(**asdict(self.pos)))
        rejects: list[RejectRecord] = []
        parser = LineParser(self.fmt, config=self.config, site=self.site, source_name=self.source,
                            seq_start=self.pos.seq, origin=self.origin, on_reject=rejects.append)
        self._warm_up(parser, follower)
        rejects.clear()
        shipped = 0
        committer = ThreadPoolExecutor(1, thread_name_prefix="shipper-commit")
        pending = None

        def settle() -> None:
            nonlocal pending
            if pending is not None:
                done, pending = pending, None
                done.result()  # re-raises a failed transaction

        try:
            while True:
                chunk: list[str] = []
                first_line = None
                deadline = time.monotonic() + self.linger
                for line, nbytes in follower.lines():
                    if first_line is None:
                        first_line = follower.pos.line
                    chunk.append(line)
                    follower.pos.offset += nbytes
                    follower.pos.line += 1
                    shipped += 1
                    if len(chunk) >= self.batch_events or time.monotonic() > deadline or shipped == max_lines:
                        break
                if chunk:
                    LINES_READ.labels(self.id).inc(len(chunk))
                    parser.continue_at_line(first_line)
                    events = [e for batch in parser.batches(chunk) for e in batch]
                    follower.pos.seq = parser.enrich.seq
                    settle()
                    pending = committer.submit(self._commit, events, list(rejects), Position(**asdict(follower.pos)))
                    rejects.clear()
                    if shipped == max_lines:
                        settle()
                        return self.pos
                    continue
                settle()
                if not follow or stop():
                    return self.pos
                time.sleep(poll_seconds)
        finally:
            try:
                if pending is not None:
                    pending.result()
            finally:
                committer.shutdown(wait=True)
                follower.close()

    def _warm_up(self, parser: LineParser, follower: "FileFollower") -> None:
        """Resuming mid-file: parse the lines before the committed offset again, events dropped,
        so the parser's per-stream memory (sizes of earlier whole reads for partial HTTP GETs,
        dCache pnfsid → path) is what an uninterrupted run would have: a restart must not change
        which later lines become events."""
        offset = follower.pos.offset
        if offset <= 0:
            return
        seq = parser.enrich.seq
        with open(self.source, "rb") as f:
            prefix = f.read(offset).decode("utf-8", "replace").splitlines()
        for _ in parser.batches(prefix):
            pass
        parser.enrich.seq = seq
        parser.stats = ParseStats()

    def close(self) -> None:
        self.sink.close()
