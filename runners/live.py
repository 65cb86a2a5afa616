"""The live embedded runner: `cachescope serve --store DIR --collect udp://HOST:PORT`.

XRootD's monitoring is received and decoded (ingest.xrootd_monitoring) on two threads of the
serving process; every second (and when idle) the events decoded so far go through the shadow
caches of their cache groups exactly as `cachescope replay` feeds them (runners.embedded.
process_columns: the same GroupState, the same RowWriter into the same store), so the API and the
page show them as they come. Late events and rejects go to DIR/rejects.jsonl, the collector's
counts (datagrams, events, lost in sequence gaps, undecodable) to pipeline_health (component
`collect`) at every flush, and to the API's /metrics.

Exactly once (with the spool, always on here: DIR/spool): what arrives is on disk before it is
decoded (ingest/xrootd_monitoring/spool.py); every `ingest.spool.checkpoint_seconds` and at a
stop, the spool position decoding reached is saved together with the Assembler's state and
every cache group's state (caches, open windows, rows not yet confirmed by the store: what Flink
keeps in a checkpoint). A restart, after a SIGTERM or a kill -9, restores that and decodes the
spool from there: decoding is deterministic given the datagrams and rows given a group's events,
so what was written after the checkpoint is written again identically (the tables keep one), the
same `run` and the same seq go on, and nothing received is lost. At a stop the checkpoint is
saved first, then held accesses are written and open windows closed for the page (as a replay's
at its end); a restart goes on from the checkpoint, so those windows are written again, complete,
under the same keys, and the tables keep the last. The first start of a spool numbers each origin
after what the store already holds of it (`seq_base`, kept in the checkpoints), so identities
are never reused.

An error that stops decoding (the store refusing inserts, a bug) leaves the receiving process
spooling, is set as `error` (GET /healthz answers 503 with it) and written to pipeline_health
(`ingestion_stopped`); the next start decodes what arrived meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from cachescope.config import CachescopeConfig
from cachescope.core.columns import EventColumns
from cachescope.core.group_state import GroupState
from cachescope.core.health import health_rows
from cachescope.core.writer import RowWriter
from cachescope.events import AccessEvent
from cachescope.store import Store, tables
from ingest.xrootd_monitoring.assemble import Assembler
from ingest.xrootd_monitoring.receiver import Receiver
from ingest.xrootd_monitoring.run import Checkpoints, Collector, receiver_metrics
from runners.embedded import process_columns


class StoreSink:
    """A collector sink: events -> shadow caches -> the store."""

    def __init__(self, config: CachescopeConfig, store: Store, site: str,
                 on_late: Callable[[EventColumns], None] = lambda late: None,
                 on_reject: Callable[[dict], None] = lambda doc: None):
        self.pipeline = config.pipeline
        self.store = store
        self.site = site or config.site
        self.on_late = on_late
        self.on_reject = on_reject
        self.unstorable = 0  # events the store's columns cannot hold (a size beyond u64's signed half...)
        self.groups: dict[tuple[str, int], GroupState] = {}
        self.pending: list[AccessEvent] = []
        self.events = 0
        self.late = 0
        self.writer = RowWriter(store, background=True, max_queued=2)
        self.extra: Callable[[], dict[str, int]] = dict  # more health counts (the socket's, the spool's)

    def write(self, events: list[AccessEvent]) -> None:
        self.pending += events

    def state(self) -> dict:
        return {"groups": self.groups, "events": self.events, "late": self.late, "unstorable": self.unstorable}

    def load_state(self, state: dict) -> None:
        self.groups, self.events, self.late = state["groups"], state["events"], state["late"]
        self.unstorable = state.get("unstorable", 0)

    def flush(self, assembler: Assembler) -> None:
        self.writer.check()
        if self.pending:
            batch, self.pending = self.pending, []
            cols = self._columns(batch)
            if len(cols):
                self.late += process_columns(self.groups, cols, self.pipeline, self.on_late)
            self.events += len(cols)
            for st in self.groups.values():
                st.write(self.writer, "collect")
        self.store.insert(tables.PIPELINE_HEALTH, health_rows("collect", self.site, {
            **assembler.stats.health_metrics(), **self.extra(), "unstorable_events": self.unstorable}))

    def _columns(self, batch: list[AccessEvent]) -> EventColumns:
        """The batch as columns; an event they cannot hold is a reject with its reason, and the
        rest go on (one bad value must not stop the live mode)."""
        try:
            return EventColumns.from_events(batch)
        except (OverflowError, ValueError, TypeError):
            pass
        good = []
        for e in batch:
            try:
                EventColumns.from_events([e])
            except (OverflowError, ValueError, TypeError) as exc:
                self.unstorable += 1
                self.on_reject({"origin": e.origin, "seq": e.seq, "path": e.path, "skipped": False,
                                "reason": f"a value the store cannot hold ({type(exc).__name__}: {exc})"})
                continue
            good.append(e)
        return EventColumns.from_events(good)

    def close(self, finish: bool = True) -> None:
        """Close every open window (`finish`) and write it; wait until the store has every row."""
        for st in self.groups.values():
            if finish:
                st.finish()
            st.write(self.writer, "collect")
        self.writer.close()


class LiveCollector:
    """Receiving, decoding and the shadow caches on background threads of the serving process."""

    def __init__(self, listen: tuple[str, int], config: CachescopeConfig, store: Store, *, site: str = "",
                 rejects: Path | None = None, spool: Path | None = None):
        self.store, self.site = store, site or config.site
        self.receiver = Receiver(*listen, spool=spool, rcvbuf=config.ingest.receive_buffer_bytes)
        self._rejects = open(rejects, "ab") if rejects is not None else None  # noqa: SIM115
        self.seq_base: dict[str, int] = {}
        self.assembler = Assembler(config, site=site, on_reject=self._reject,
                                   seq_of=lambda origin: self.seq_base.get(origin, 0))
        self.sink = StoreSink(config, store, site, on_late=self._late, on_reject=self._reject)
        self.sink.extra = lambda: receiver_metrics(self.receiver)
        self.checkpoints: Checkpoints | None = None
        self._paused = False
        self.every = config.ingest.spool.checkpoint_seconds
        self._last_checkpoint = time.monotonic()
        self.resumed_at: int | None = None  # the spool position a checkpoint resumed at
        if spool is not None:
            sp = config.ingest.spool
            self.checkpoints = Checkpoints(spool, "live", max_bytes=sp.max_bytes, max_age_s=sp.max_age_s)
            saved = self.checkpoints.load()
            if saved is not None:
                self.assembler.load_state(saved["assembler"])
                self.sink.load_state(saved["sink"])
                self.seq_base = saved["sink"]["seq_base"]
                self.receiver.resume(saved["pos"])
                self.resumed_at = saved["pos"]
            else:  # a new spool: each origin numbered after what the store holds of it
                self.seq_base = _next_seqs(store)
                self._checkpoint(force=True)
        self.collector = Collector(self.receiver, self.assembler, self.sink, on_flush=self._checkpoint,
                                   on_pause=self._pause, finish_on_stop=True)
        self._thread = threading.Thread(target=self._run, name="collect-decode", daemon=True)
        self.error: BaseException | None = None
        #: one line: why ingestion stopped (GET /healthz answers 503 with it)
        self.error_reason: str | None = None

    def _pause(self) -> None:
        self._checkpoint(force=True)
        self._paused = True  # what is written after this (held accesses, closed windows) is not the state

    def _checkpoint(self, force: bool = False) -> None:
        if self.checkpoints is None or self._paused or not force and time.monotonic() - self._last_checkpoint < self.every:
            return
        pos = self.receiver.pos
        self.checkpoints.save(pos, self.assembler, {**self.sink.state(), "seq_base": self.seq_base})
        self.checkpoints.done(pos)
        self._last_checkpoint = time.monotonic()

    def _reject(self, doc: dict) -> None:
        if self._rejects is not None:
            self._rejects.write(orjson.dumps(doc) + b"\n")

    def _late(self, late: EventColumns) -> None:
        if self._rejects is not None:  # as `cachescope replay` writes them
            for i in range(len(late)):
                self._rejects.write(orjson.dumps({
                    "origin": late.origin[i], "skipped": False,
                    "reason": "late: its window had closed (allowed lateness passed)",
                    "cache_group": late.cache_group[i], "ts": int(late.ts[i]), "seq": int(late.seq[i]),
                    "path": late.path[i]}) + b"\n")

    def _run(self) -> None:
        try:
            self.collector.run()
        except BaseException as exc:  # noqa: BLE001 - reported by /healthz, pipeline health and stop()
            first = str(exc).splitlines()[0] if str(exc) else ""
            self.error_reason = f"{type(exc).__name__}: {first}"[:300]
            self.error = exc
            try:
                self.store.insert(tables.PIPELINE_HEALTH, health_rows("collect", self.site, {
                    "ingestion_stopped": 1, f"ingestion_stopped:{self.error_reason[:120]}": 1}))
            except Exception:  # noqa: BLE001 - the store itself may be what failed; /healthz still says it
                pass

    def start(self) -> "LiveCollector":
        self.receiver.start()  # returns once the receiving process receives
        self._thread.start()
        return self

    def stop(self) -> None:
        """Write everything received (the checkpoint saved before the held accesses and open
        windows are), close the caches' windows, stop."""
        self.collector.stop.set()
        self._thread.join()
        if self.error is not None:
            self.receiver.stop()  # what it spooled meanwhile is the next run's
            self.sink.writer.close()
        else:
            self.sink.close()
        if self._rejects is not None:
            self._rejects.close()


def _next_seqs(store: Store) -> dict[str, int]:
    """origin -> the seq after the last one the store holds, for the collector's origins."""
    res = store.query(f"SELECT origin, max(seq) + 1 FROM {tables.ACCESS_EVENTS} "
                      "WHERE startsWith(origin, 'xrootd:') GROUP BY origin")
    return {origin: int(n) for origin, n in res.rows}
