"""The collector's loop: the receiving thread's queue -> Assembler -> a sink, until told to stop.

Sinks: `LinesOut` (AccessEvent JSON lines to a file or stdout, as `cachescope parse` prints them)
and `KafkaOut` (batched AccessEvent messages in Kafka transactions, like `cachescope ship`, with
the next seq of every server stream in a compacted state topic in the same transaction, so a
restarted collector continues each stream's numbering: an event is never sent twice under one
identity, nor two events under one). A sink gets the events of every datagram as soon as they are
decoded and is flushed every `linger` seconds, when idle, and at the end.
"""

from __future__ import annotations

import threading
import time
from typing import IO, Callable, Protocol

import orjson

from cachescope.events import AccessEvent, encode_lines
from ingest.xrootd_monitoring.assemble import Assembler
from ingest.xrootd_monitoring.receiver import Receiver

FMT = "xrootd-monitoring"


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
        self.next_seq: dict[str, int] = {k.decode(): int(orjson.loads(v)["seq"]) for k, v in found.items()}
        self.pending: list[AccessEvent] = []
        self._sent: dict[str, int] = {}  # health counts already committed
        self.committed = 0

    def seq_of(self, origin: str) -> int:
        return self.next_seq.get(origin, 0)

    def write(self, events: list[AccessEvent]) -> None:
        self.pending += events

    def flush(self, assembler: Assembler) -> None:
        counts = assembler.stats.health_metrics()
        delta = {k: v - self._sent.get(k, 0) for k, v in counts.items() if v - self._sent.get(k, 0)}
        delta.pop("events", None)  # the health record's own field
        delta.pop("rejected", None)
        delta.pop("skipped", None)
        if not self.pending and not delta:
            return
        events, self.pending = self.pending, []
        seqs: dict[str, int] = {}
        for e in events:
            seqs[e.origin] = e.seq + 1

        def mark(sink) -> None:
            for origin, seq in seqs.items():
                sink.send(self.state_topic, origin.encode(), orjson.dumps({"seq": seq}))

        self.sink.commit(events, [], mark, {}, lines=counts["datagrams"] - self._sent.get("datagrams", 0),
                         counts=delta)
        self.next_seq.update(seqs)
        self._sent = counts
        self.committed += len(events)

    def close(self) -> None:
        self.sink.close()


class Collector:
    """Runs until `stop` is set or nothing arrived for `idle_seconds`; then writes everything
    received (the queue drained, f-stream accesses still held) and returns."""

    def __init__(self, receiver: Receiver, assembler: Assembler, sink: Sink, *, stop: threading.Event | None = None,
                 idle_seconds: float | None = None, linger: float = 1.0, on_flush: Callable[[], None] | None = None):
        self.receiver, self.assembler, self.sink = receiver, assembler, sink
        self.stop = stop or threading.Event()
        self.idle = idle_seconds
        self.linger = linger
        self.on_flush = on_flush or (lambda: None)
        self.stopped_idle = False

    def run(self) -> None:
        receiver, assembler, sink = self.receiver, self.assembler, self.sink
        feed, write = assembler.feed, sink.write
        last_data = last_flush = time.monotonic()
        dirty = False
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
        finally:
            receiver.stop()
            while (item := receiver.get_nowait()) is not None:
                write(feed(*item))
            write(assembler.finish())
            sink.flush(assembler)
            self.on_flush()
