"""RowWriter: writes the batches GroupStates hand over, inline or on a background thread.

In the background, ClickHouse's share of an insert (parsing, sorting, the rollup views: most of
an insert's time is the server's) overlaps the processing of the next events. A batch counts
as written only when the store accepted all of it; until then it stays in its GroupState's
outbox (in flight), so a checkpoint taken meanwhile still holds it. An insert the store refuses
because it (or one of its shards) is unreachable is retried with a doubling back-off for up to
`retry_for` seconds, logged at each retry; once written, the outage goes into pipeline_health
(component `writer`: `store_retries`, `store_unavailable_s`). A retried insert that was partly
written (one shard took its share) writes those rows again, and the tables' replacing engines
collapse them. Any other failure, or an outage longer than that, is raised in the caller's
thread at its next call: the job fails and restarts from its last checkpoint.

A batch can also be handed over to be written later (`submit(…, hold_until=…)`): the writer's
thread keeps it, in flight, until that time or until something else is written, and writes it
with that. So rows leave the processing thread at every message and still go in few, large
inserts, and no row waits for the processing thread's next timer (PyFlink fires timers only
between bundles).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

import numpy as np

from cachescope.core.health import health_rows
from cachescope.core.outbox import Batch
from cachescope.store import tables
from cachescope.store.base import StoreError, StoreFull, is_transient

log = logging.getLogger(__name__)

Written = Callable[[dict[str, dict[str, np.ndarray]]], None]
_STOP = object()
_FLUSH = object()  # write what is held now
MAX_COALESCED = 64
#: inserts after close(): the producer has stopped, so nothing else wants the cores; ClickHouse
#: then squashes blocks of this many rows and writes them on two threads (the backlog of a replay
#: drains ×1.5–1.7 faster). While the producer runs, both cores are busy and one large block per
#: table costs less CPU.
DRAIN_SETTINGS = {"min_insert_block_size_rows": 262_144, "max_insert_threads": 2}
#: retries of an unreachable store: first wait, longest wait, and how long in all before the
#: failure goes to the caller (a Flink job then restarts from its checkpoint, which covers longer
#: outages too, at the cost of a replay)
RETRY_FIRST_S, RETRY_MAX_S, RETRY_FOR_S = 0.5, 8.0, 300.0


class RowWriter:
    def __init__(self, store, background: bool = True, max_queued: int = 4, on_written: Written | None = None,
                 prepare: Callable[[], object] | None = None, max_held_rows: int = 100_000,
                 retry_for: float = RETRY_FOR_S):
        """`max_queued` batches may wait for the thread: beyond that submit() blocks, which is the
        back-pressure that keeps a slow store from filling memory. `prepare` (the store's
        migrations) runs first on the writer's thread, before any insert, while the caller goes
        on processing; its error is raised as it is, at the caller's next call. Held batches are
        written early once they hold `max_held_rows` rows. An unreachable store is retried for
        `retry_for` seconds (0: never)."""
        self.store = store
        self.max_held_rows = max_held_rows
        self.retry_for = retry_for
        #: inserts retried and seconds the store was unreachable, since the writer started
        self.retries = 0
        self.unavailable_s = 0.0
        self._outage: tuple[int, float] | None = None  # (retries, seconds) of an outage not yet reported
        self.on_written = on_written
        self._error: BaseException | None = None
        self._prepare_error: BaseException | None = None
        self._draining = False
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._queue = queue.Queue(maxsize=max_queued)
            self._thread = threading.Thread(target=self._run, args=(prepare,), name="cachescope-row-writer",
                                            daemon=True)
            self._thread.start()
        elif prepare is not None:
            prepare()

    def submit(self, batch: Batch | None, health: dict[str, np.ndarray] | None = None,
               hold_until: float | None = None) -> None:
        """Write `batch` (with its health rows) as soon as the thread can, or, with `hold_until`
        (a time.time()), at that time at the latest: earlier if anything else is written first.
        Of the health rows written together, each cache group's newest are kept."""
        self.check()
        if batch is None:
            return
        if self._queue is None:
            self._write(batch, health)
        else:
            self._queue.put((batch, health, hold_until))

    def wait(self) -> None:
        """Return when everything submitted is written, held batches too (raises a failed
        write's error)."""
        if self._thread is not None:  # a closed writer has written everything
            self._queue.put(_FLUSH)
            self._queue.join()
        self.check()

    def check(self) -> None:
        if self._prepare_error is not None:
            raise self._prepare_error
        if isinstance(self._error, StoreFull):  # the user's to act on: said as it is
            raise self._error
        if self._error is not None:
            raise RuntimeError(f"writing rows to the store failed: {self._error}") from self._error

    def close(self) -> None:
        """Write what is queued and stop the thread."""
        if self._thread is not None:
            self._draining = True
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None
        self.check()

    def _write(self, batch: Batch, health: dict[str, np.ndarray] | None) -> None:
        self._write_all([(batch, health)])

    def _write_all(self, items: list[tuple[Batch, dict[str, np.ndarray] | None]]) -> None:
        """One insert per table for all the batches: fewer, larger parts for ClickHouse."""
        written = Batch.merge([b for b, _ in items]).columns()
        for table, columns in written.items():
            # read per table: the producer may stop while a batch is being written, and the rest
            # of that batch then has the cores to itself too
            self._insert(table, columns, DRAIN_SETTINGS if self._draining else None)
        for b, _ in items:
            b.done = True
        newest: dict[str, dict[str, np.ndarray]] = {}
        for _, h in items:  # each group's figures are cumulative: its newest say it all
            if h is not None and len(h["cache_group"]):
                newest[h["cache_group"][0]] = h
        health = list(newest.values())
        if self._outage is not None:  # the store is back: say how long it was not
            retries, seconds = self._outage
            health.append(health_rows("writer", "", {"store_retries": retries, "store_unavailable_s": seconds}))
        if health:
            self._insert(tables.PIPELINE_HEALTH, {k: np.concatenate([h[k] for h in health]) for k in health[0]})
            self._outage = None
        if self.on_written is not None:
            self.on_written(written)

    def _insert(self, table: str, columns, settings=None) -> None:
        """store.insert, retried with a doubling back-off while the store is unreachable."""
        delay, start = RETRY_FIRST_S, None
        while True:
            try:
                self.store.insert(table, columns, settings)
                break
            except StoreError as e:
                now = time.monotonic()
                start = now if start is None else start
                if isinstance(e, StoreFull) or not is_transient(str(e)) or now - start + delay > self.retry_for:
                    raise
                self.retries += 1
                retries, seconds = self._outage or (0, 0.0)
                self._outage = (retries + 1, seconds)
                log.warning("the store is unreachable (%s): insert into %s retried in %.1f s (retry %d)",
                            str(e).splitlines()[0][:300], table, delay, self.retries)
                time.sleep(delay)
                delay = min(2 * delay, RETRY_MAX_S)
        if start is not None:
            lasted = time.monotonic() - start
            self.unavailable_s += lasted
            retries, seconds = self._outage
            self._outage = (retries, seconds + lasted)
            log.warning("the store took the insert into %s after %.1f s unreachable", table, lasted)

    def _run(self, prepare: Callable[[], object] | None) -> None:
        if prepare is not None:
            try:
                prepare()
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                self._prepare_error = self._error = e
        stop = False
        held: list[tuple[Batch, dict[str, np.ndarray] | None]] = []
        held_rows, due = 0, float("inf")
        while not stop:
            try:
                items = [self._queue.get(timeout=None if not held else max(0.0, due - time.time()))]
            except queue.Empty:
                items = []
            while len(items) < MAX_COALESCED:  # whatever else waits goes into the same inserts
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(i is _STOP for i in items)
            work: list[tuple[Batch, dict[str, np.ndarray] | None]] = []  # to write now
            for item in items:
                if not isinstance(item, tuple):  # _STOP, _FLUSH
                    continue
                batch, health, until = item
                if until is None:
                    work.append((batch, health))
                else:
                    held.append((batch, health))
                    held_rows += batch.rows
                    due = min(due, until)
            flush = stop or any(i is _FLUSH for i in items) or held_rows >= self.max_held_rows or time.time() >= due
            if held and (work or flush):  # held rows go with any insert, so they never wait longer
                work, held, held_rows, due = held + work, [], 0, float("inf")
            try:
                if work and self._error is None:  # after a failure, nothing more: the job restarts from its checkpoint
                    self._write_all(work)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                self._error = e
            finally:
                for _ in items:
                    self._queue.task_done()
