"""The collector's loop: the receiving thread's queue -> Assembler -> a sink, until told to stop.

Sinks: `LinesOut` (AccessEvent JSON lines to a file or stdout, as `cachescope parse` prints them)
and `KafkaOut` (batched AccessEvent messages in Kafka transactions, like `cachescope ship`, with
the next seq of every server stream in a compacted state topic in the same transaction, so a
restarted collector continues each stream's numbering: an event is never sent twice under one
identity, nor two events under one). A sink gets the events of every datagram as soon as they are
decoded and is flushed every `linger` seconds, when idle, and at the end.

With a spool (`Receiver(spool=DIR)`), each flush ends with a checkpoint: the spool position the
decoding reached and the Assembler's state (and the sink's, for the live mode) saved together
(`Checkpoints`; for Kafka the position also goes into the same transaction as the events), so a
restart decodes exactly from there. A stop by signal is then a pause for `--to` and `--out`:
what was received is decoded and written, but accesses still held (an f-stream close waiting
for its trace, a g-stream record for its f-stream) stay in the checkpoint for the next run
instead of being forced out; only the end of input (`--stop-after-idle`) finishes them. The
live mode (`finish_on_stop`) saves its checkpoint first (`on_pause`) and then writes them and
closes its windows for the page; a restart goes on from the checkpoint and writes those rows
again, complete, under the same keys (the tables keep the last).
"""

from __future__ import annotations

import pickle
import threading
import time
from pathlib import Path
from typing import IO, Callable, Protocol

import orjson

from cachescope.errors import UserError
from cachescope.events import AccessEvent, encode_lines
from ingest.xrootd_monitoring.assemble import Assembler
from ingest.xrootd_monitoring.receiver import Receiver
from ingest.xrootd_monitoring.spool import Positions, prune

FMT = "xrootd-monitoring"


class Checkpoints:
    """The spool's checkpoints: (spool position, Assembler state, sink state) saved atomically
    beside the segments as `NAME-POSITION.state`. `done(pos)` removes the older ones and the spool
    before `pos`; a Kafka sink saves before its commit, so after a crash between the two the
    checkpoint its last transaction names is still there."""

    def __init__(self, directory: Path, name: str, *, max_bytes: int, max_age_s: float):
        self.dir = directory
        self.files = Positions(directory)
        self.name = name
        self.max_bytes, self.max_age_s = max_bytes, max_age_s
        self.discarded_bytes = 0  # spool removed by its bounds before it was decoded (the reader counts it too)

    VERSION = 1

    def save(self, pos: int, assembler: Assembler, sink_state: object = None) -> None:
        self.files.write(f"{self.name}-{pos:020d}", pickle.dumps(
            {"v": self.VERSION, "pos": pos, "assembler": assembler.state(), "sink": sink_state},
            protocol=pickle.HIGHEST_PROTOCOL))

    def load(self, pos: int | None = None) -> dict | None:
        """The newest checkpoint (or the one at `pos`), None when there is none."""
        names = [n for n in self.files.names() if n.startswith(self.name + "-")]
        if pos is not None:
            names = [n for n in names if n == f"{self.name}-{pos:020d}"]
        if not names:
            return None
        data = self.files.read(names[-1])
        if data is None:
            return None
        try:
            saved = pickle.loads(data)
            if saved.get("v") != self.VERSION:
                raise ValueError(f"format version {saved.get('v')}")
            return saved
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is the same one line
            raise UserError(f"the spool's checkpoint {self.dir / names[-1]}.state cannot be read ({type(exc).__name__}: "
                            f"{exc}): it was written by another cachescope release, or damaged; restart with that "
                            f"release, or move {self.dir} aside to start a new spool (what it held and was not "
                            "stored yet is then not decoded)") from None

    def done(self, pos: int) -> None:
        """Everything before `pos` is stored: older checkpoints and the spool before it go."""
        for n in self.files.names():
            if n.startswith(self.name + "-") and n < f"{self.name}-{pos:020d}":
                self.files.remove(n)
        self.discarded_bytes += prune(self.dir, pos, self.max_bytes, self.max_age_s)


def receiver_metrics(receiver: Receiver) -> dict[str, int]:
    """What the socket and the spool say beside the Assembler's counts (pipeline_health, --stats);
    a bus source (bus.py) has no socket."""
    m = {"kernel_drops": receiver.kernel_drops()} if hasattr(receiver, "kernel_drops") else {}
    if receiver.spool is not None:
        m["spool_skipped_bytes"] = receiver.skipped_bytes()
    return m


class Sink(Protocol):
    def write(self, events: list[AccessEvent]) -> None: ...

    def flush(self, assembler: Assembler) -> None: ...


class LinesOut:
    """AccessEvent JSON lines to a binary stream."""

    def __init__(self, out: IO[bytes]):
        self.out = out

    def write(self, events: list[AccessEvent]) -> None:
        if events:
            self.out.write(encode_lines(events))

    def flush(self, assembler: Assembler) -> None:
        self.out.flush()


class KafkaOut:
    """Events to kafka://HOST:PORT/TOPIC, one transaction per flush, exactly once from receipt."""

    STATE_SUFFIX = ".collect-state"

    SPOOL_KEY = "spool:"

    def __init__(self, to: str, collector_id: str, *, batch_events: int = 20_000):
        from ingest.shipper import RdKafkaSink, read_compacted

        self.id = collector_id
        self.batch_events = batch_events
        topic = to.rsplit("/", 1)[-1]
        self.state_topic = topic + self.STATE_SUFFIX
        self.sink = RdKafkaSink(to, shipper_id=f"collect-{collector_id}", fmt=FMT,
                                extra_topics=[(self.state_topic, {"cleanup.policy": "compact"})])
        found = read_compacted(self.sink.bootstrap, self.state_topic, f"cachescope-collect-state-{collector_id}",
                               lambda key: True)
        #: origin -> next seq, as committed
        self.next_seq: dict[str, int] = {k.decode(): int(orjson.loads(v)["seq"]) for k, v in found.items()
                                         if not k.startswith(self.SPOOL_KEY.encode())}
        spool = found.get(f"{self.SPOOL_KEY}{collector_id}".encode())
        #: the spool position whose events the last transaction holds (with a spool)
        self.spool_pos: int | None = int(orjson.loads(spool)["pos"]) if spool is not None else None
        #: set with a spool: (receiver, checkpoints): the position and the Assembler's state go
        #: with every transaction
        self.spool: tuple[Receiver, Checkpoints] | None = None
        self.extra: Callable[[], dict[str, int]] = dict  # more health counts (`receiver_metrics`)
        self.pending: list[AccessEvent] = []
        self._sent: dict[str, int] = {}  # health counts already committed
        self.committed = 0

    def seq_of(self, origin: str) -> int:
        return self.next_seq.get(origin, 0)

    def write(self, events: list[AccessEvent]) -> None:
        self.pending += events

    def flush(self, assembler: Assembler) -> None:
        counts = {**assembler.stats.health_metrics(), **self.extra()}
        delta = {k: v - self._sent.get(k, 0) for k, v in counts.items() if v - self._sent.get(k, 0)}
        delta.pop("events", None)  # the health record's own field
        delta.pop("rejected", None)
        delta.pop("skipped", None)
        pos = self.spool[0].pos if self.spool is not None else None
        if not self.pending and not delta and pos == self.spool_pos:
            return
        events, self.pending = self.pending, []
        seqs: dict[str, int] = {}
        for e in events:
            seqs[e.origin] = e.seq + 1
        if self.spool is not None:  # saved before the commit: the transaction names a checkpoint that exists
            self.spool[1].save(pos, assembler)

        def mark(sink) -> None:
            for origin, seq in seqs.items():
                sink.send(self.state_topic, origin.encode(), orjson.dumps({"seq": seq}))
            if pos is not None:
                sink.send(self.state_topic, f"{self.SPOOL_KEY}{self.id}".encode(), orjson.dumps({"pos": pos}))

        self.sink.commit(events, [], mark, {}, lines=counts["datagrams"] - self._sent.get("datagrams", 0),
                         counts=delta)
        self.next_seq.update(seqs)
        self._sent = counts
        self.committed += len(events)
        if self.spool is not None:
            self.spool_pos = pos
            self.spool[1].done(pos)

    def close(self) -> None:
        self.sink.close()


class Collector:
    """Runs until `stop` is set or nothing arrived for `idle_seconds`; then writes everything
    received (the queue drained, f-stream accesses still held: unless a spool keeps them for the
    next run) and returns. With a spool, an error leaves the receiving process spooling: what
    arrives meanwhile is decoded by the next run."""

    def __init__(self, receiver: Receiver, assembler: Assembler, sink: Sink, *, stop: threading.Event | None = None,
                 idle_seconds: float | None = None, linger: float = 1.0, on_flush: Callable[[], None] | None = None,
                 on_pause: Callable[[], None] | None = None, finish_on_stop: bool = False):
        self.receiver, self.assembler, self.sink = receiver, assembler, sink
        self.stop = stop or threading.Event()
        self.idle = idle_seconds
        self.linger = linger
        self.on_flush = on_flush or (lambda: None)
        self.on_pause = on_pause or (lambda: None)  # with a spool: everything received is decoded and written
        self.finish_on_stop = finish_on_stop
        self.stopped_idle = False

    def run(self) -> None:
        receiver, assembler, sink = self.receiver, self.assembler, self.sink
        write = sink.write
        last_data = last_flush = time.monotonic()
        dirty = False
        spooled = receiver.spool is not None
        if spooled:
            # a spooled datagram's own arrival time moves the reorder window: decoding the spool again
            # after a restart passes it exactly as the first time did
            def feed(payload: bytes, ip: str) -> list:
                return assembler.feed(payload, ip, receiver.arrival / 1e6)
        else:
            feed = assembler.feed
        ok = False
        try:
            while not self.stop.is_set():
                item = receiver.get(0.1)
                quiet = item is None  # nothing for 0.1 s: write what is decoded now
                if quiet:  # the reorder window and idle streams pass with time, too
                    events = assembler.tick()
                    if events:
                        write(events)
                        dirty = True
                now = time.monotonic()
                if item is not None:
                    last_data = now
                    write(feed(*item))
                    dirty = True
                    # drain what is queued without waiting: a burst is decoded in one go
                    for _ in range(10_000):
                        item = receiver.get_nowait()
                        if item is None:
                            break
                        write(feed(*item))
                    now = time.monotonic()
                # a burst is written (a Kafka transaction) every `linger` s, not per datagram
                if dirty and (quiet or now - last_flush >= self.linger):
                    sink.flush(assembler)
                    self.on_flush()
                    last_flush, dirty = now, False
                if self.idle is not None and now - last_data >= self.idle:
                    self.stopped_idle = True
                    break
            ok = True
        finally:
            if ok or not spooled:
                receiver.stop()
                while (item := receiver.get_nowait()) is not None:
                    write(feed(*item))
                if spooled:
                    sink.flush(assembler)
                    self.on_flush()
                    self.on_pause()
                if not spooled or self.stopped_idle or self.finish_on_stop:
                    write(assembler.finish())
                    sink.flush(assembler)
                    self.on_flush()
