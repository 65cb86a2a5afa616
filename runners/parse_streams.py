"""The replay's inputs as streams of event columns: one per log file, parsed in this process or
in a child process, and their merge in (ts, origin) order.

Parsing (JSON decoding, enrichment, tier classification) is most of a replay's CPU time. In a
child process per file it overlaps the shadow caches and the inserts of the main process (the
machine's other core): the child runs the same LineParser over the whole file (its ParseContext
and seq numbering see the file's lines in order, as inline) and sends column batches, its
rejected lines and its counts through a pipe, received by a thread of the main process into a
queue of CHILD_AHEAD batches: that bounds how far a child runs ahead.

The merge is the one `heapq.merge(key=(ts, origin))` over the files' events gave (a test checks
it against heapq on random streams), done on arrays: for streams that are each in time order
that is a merge by (ts, origin); for unsorted streams heapq's order equals a merge by each
event's running maximum of ts in its stream, which is what is sorted on here.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from cachescope.specs import factorize_str as _factorize_str
from cachescope.config import CachescopeConfig
from cachescope.core.columns import EventColumns
from cachescope.errors import InputError, UserError
from cachescope.events import CLICKHOUSE_TYPES
from ingest.pipeline import LineParser, ParseStats, RejectRecord, file_origin, open_lines

#: events per batch a child process sends (larger batches: fewer messages, same order)
CHILD_BATCH = 16_384
#: messages a child may be ahead of the merge (each up to CHILD_BATCH events)
CHILD_AHEAD = 8
#: inputs of at least this many bytes in all are parsed in child processes (below, starting a
#: process costs more than it saves)
CHILD_MIN_BYTES = 16 << 20
#: a child runs at this much lower scheduling priority than the replay: it is up to CHILD_AHEAD
#: batches ahead, while the replay's inserts are the chain the run waits for. With both cores
#: busy, the scheduler then gives the inserts the share the parser can spare, and the writer's
#: backlog at the end (written while one core idles) shrinks
CHILD_NICENESS = 10

Reject = Callable[[str, RejectRecord], None]


def use_children(files: list[str | Path]) -> bool:
    """Parse in child processes: a second core, and enough input to be worth a process start."""
    if (os.cpu_count() or 1) < 2 or any(str(f) == "-" for f in files):
        return False
    try:
        return sum(os.path.getsize(f) for f in files) >= CHILD_MIN_BYTES
    except OSError:
        return False  # the inline parser reports the file


class Stream:
    """One file's events, in input order, as EventColumns batches."""

    name: str
    origin: str
    stats: ParseStats
    error: str | None  # a damaged input: the events before the damage were delivered

    def batches(self) -> Iterator[EventColumns]:
        raise NotImplementedError

    def close(self) -> None:
        """Stop reading (a stopped replay)."""


class InlineStream(Stream):
    def __init__(self, name: str, fmt: str, config: CachescopeConfig, site: str, on_reject: Reject):
        self.name = name
        self.parser = _parser(name, fmt, config, site, on_reject)
        self.origin = self.parser.enrich.origin
        self.stats = self.parser.stats
        self.error = None
        self._gen: Iterator[EventColumns] | None = None

    def batches(self) -> Iterator[EventColumns]:
        self._gen = self._run()
        return self._gen

    def _run(self) -> Iterator[EventColumns]:
        try:
            yield from self.parser.column_batches(open_lines(self.name), batch_size=4096)
        except InputError as exc:  # damaged input: the other files go on
            self.error = str(exc)

    def close(self) -> None:
        if self._gen is not None:
            self._gen.close()  # the parser counts the lines it read


def _parser(name: str, fmt: str, config: CachescopeConfig, site: str, on_reject) -> LineParser:
    # skipped lines (headers, door requests ...) are counted by reason only: the replay drops them
    return LineParser(fmt, config=config, site=site, source_name=name, seq_start=config.ingest.seq_start,
                      on_reject=lambda rec: None if rec.skipped else on_reject(name, rec), record_skipped=False)


_LOW_CARDINALITY = {n for n, t in CLICKHOUSE_TYPES.items() if t.startswith("LowCardinality(")}


def _pack(columns: dict[str, np.ndarray]) -> dict:
    """A batch's columns for the pipe: text columns of few values as (codes, values), so neither
    side pickles an object per event; the rest as they are."""
    out: dict = {}
    for name, col in columns.items():
        few = col.dtype == object and len(col) and name in _LOW_CARDINALITY
        got = _factorize_str(col) if few else None
        if got is not None and len(got[1]) * 4 <= len(col):
            out[name] = (got[0].astype(np.int32), got[1])
        else:
            out[name] = col
    return out


def _unpack(packed: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, col in packed.items():
        if type(col) is tuple:
            values = np.empty(len(col[1]), dtype=object)
            values[:] = col[1]
            col = values[col[0]]
        out[name] = col
    return out


class ParserStopped(Exception):
    """A parse child was ended by SIGINT/SIGTERM before it could ignore them (a signal to the
    whole process group while it started): the replay stops as on that signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: rejects a child holds before it sends them (as a ("rejects", …) message of their own): a file
#: of garbage gives no events to send them with, and kept they grew without bound (8 GB for 1 GB)
CHILD_REJECTS = 2048
#: … or characters of rejected text it holds
CHILD_REJECT_CHARS = 1 << 20


def _child(conn, name: str, fmt: str, config: CachescopeConfig, site: str) -> None:
    """A child process: parse `name`, send ("events", columns, rejects, stats) per batch,
    ("rejects", rejects) as they accumulate between batches, then ("end", rejects, stats, error).
    Signals are the parent's to handle: it stops the children (SIGINT and SIGTERM are ignored
    here, so a signal to the whole process group, as systemd and container runtimes send, stops
    the replay the way a signal to the replay alone does)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.nice(CHILD_NICENESS)
    except OSError:
        pass  # only ever lowers the priority; a sandbox may refuse even that, and parsing goes on
    try:
        rejects: list[RejectRecord] = []
        held = 0  # characters of text in `rejects`

        def on_reject(source: str, rec: RejectRecord) -> None:
            nonlocal rejects, held
            rejects.append(rec)
            held += len(rec.text) + len(rec.reason)
            if len(rejects) >= CHILD_REJECTS or held >= CHILD_REJECT_CHARS:
                conn.send(("rejects", rejects))
                rejects, held = [], 0

        parser = _parser(name, fmt, config, site, on_reject)
        error = None
        try:
            for cols in parser.column_batches(open_lines(name), batch_size=CHILD_BATCH):
                conn.send(("events", _pack(cols.columns()), rejects, parser.stats))
                rejects, held = [], 0
        except InputError as exc:
            error = str(exc)
        conn.send(("end", rejects, parser.stats, error))
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # the parent stopped reading
    except BaseException as exc:  # noqa: BLE001 - named in the parent's one-line error
        try:
            conn.send(("fail", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass
    finally:
        conn.close()


class ChildStream(Stream):
    def __init__(self, name: str, fmt: str, config: CachescopeConfig, site: str, on_reject: Reject):
        self.name = name
        self.origin = file_origin(name)  # what its parser numbers events under
        self.stats = ParseStats()
        self.error = None
        self._on_reject = on_reject
        ctx = multiprocessing.get_context("spawn")  # not fork: the parent runs chdb's threads
        self._conn, child_end = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(child_end, name, fmt, config, site),
                                 name=f"cachescope-parse {os.path.basename(name)}", daemon=True)
        self._proc.start()
        child_end.close()

        # a thread takes the child's messages as they come: the pipe holds 64 KiB, less than one
        # batch, so without it the child waited for the main process's next read and the two
        # processes took turns instead of running side by side
        self._queue: queue.Queue = queue.Queue(maxsize=CHILD_AHEAD)
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._receive, name=f"cachescope-recv {os.path.basename(name)}",
                                        daemon=True)
        self._reader.start()

    def _receive(self) -> None:
        while True:
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                msg = ("eof",)
            while True:  # hand it over, unless the stream is being closed
                try:
                    self._queue.put(msg, timeout=0.1)
                    break
                except queue.Full:
                    if self._stop.is_set():
                        return
            if msg[0] in ("eof", "end", "fail"):
                return

    def batches(self) -> Iterator[EventColumns]:
        try:
            while True:
                msg = self._queue.get()
                kind = msg[0]
                if kind == "eof":
                    self._proc.join()
                    if self._proc.exitcode in (-signal.SIGINT, -signal.SIGTERM):
                        raise ParserStopped(-self._proc.exitcode)
                    raise UserError(f"the parser process of {self.name} ended unexpectedly "
                                       f"(exit code {self._proc.exitcode})")
                if kind == "fail":
                    raise UserError(f"parsing {self.name} failed: {msg[1]}")
                if kind == "rejects":
                    for rec in msg[1]:
                        self._on_reject(self.name, rec)
                    continue
                if kind == "end":
                    _, rejects, self.stats, self.error = msg
                else:
                    _, columns, rejects, self.stats = msg
                for rec in rejects:
                    self._on_reject(self.name, rec)
                if kind == "end":
                    return
                yield EventColumns(**_unpack(columns))
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        if self._proc.is_alive():
            self._proc.kill()  # our own child, by its handle (it ignores SIGTERM)
        self._proc.join()
        self._reader.join()  # it sees the end of the pipe (the child is gone) or the stop
        self._conn.close()


def open_streams(files: list[str | Path], fmt: str, config: CachescopeConfig, site: str, on_reject: Reject,
                 children: bool | None = None) -> list[Stream]:
    if children is None:
        children = use_children(files)
    kind = ChildStream if children else InlineStream
    return [kind(str(f), fmt, config, site, on_reject) for f in files]


class _Cursor:
    """A stream's buffered events with their merge keys (running max of ts)."""

    __slots__ = ("it", "rank", "parts", "keys", "last", "done", "pos")

    def __init__(self, it: Iterator[EventColumns], rank: int):
        self.it, self.rank = it, rank
        self.parts: list[EventColumns] = []
        self.keys: list[np.ndarray] = []
        self.last = np.iinfo(np.int64).min
        self.done = False

    def pull(self) -> bool:
        """Buffer the next non-empty batch; False at the end of the stream."""
        for cols in self.it:
            if len(cols):
                key = np.maximum.accumulate(np.maximum(cols.ts.astype(np.int64, copy=False), self.last))
                self.last = int(key[-1])
                self.parts.append(cols)
                self.keys.append(key)
                return True
        self.done = True
        return False


def merged(streams: list[Stream]) -> Iterator[EventColumns]:
    """The streams' events in (ts, origin) order as heapq.merge gives them (see the module doc)."""
    if len(streams) == 1:
        yield from streams[0].batches()
        return
    # ties: origin, then the stream's position in the list (heapq's order for equal keys)
    order = sorted(range(len(streams)), key=lambda i: (streams[i].origin, i))
    rank = {i: r for r, i in enumerate(order)}
    cursors = [_Cursor(s.batches(), rank[i]) for i, s in enumerate(streams)]
    while True:
        live = [c for c in cursors if not c.done]
        for c in live:
            if not c.parts:
                c.pull()
        live = [c for c in live if not c.done or c.parts]
        if not live:
            return
        open_ = [c for c in live if not c.done]
        # everything at or below the least (last key, rank) of a stream that may still send more
        bound = min(((c.last, c.rank) for c in open_), default=None)
        parts, keys, ranks = [], [], []
        for c in live:
            cols = EventColumns.concat(c.parts) if len(c.parts) > 1 else c.parts[0]
            key = np.concatenate(c.keys) if len(c.keys) > 1 else c.keys[0]
            if bound is None or c.rank <= bound[1]:
                n = int(np.searchsorted(key, bound[0], side="right")) if bound is not None else len(key)
            else:
                n = int(np.searchsorted(key, bound[0], side="left"))
            if n:
                parts.append(cols.slice(0, n) if n < len(key) else cols)
                keys.append(key[:n])
                ranks.append(np.full(n, c.rank, dtype=np.int64))
            c.parts, c.keys = ([cols.slice(n, len(key))], [key[n:]]) if n < len(key) else ([], [])
        if parts:
            cols = EventColumns.concat(parts)
            key = np.concatenate(keys)
            # stable: within a stream, input order
            yield cols.take(np.lexsort((np.concatenate(ranks), key)))


def chunks(parts: Iterator[EventColumns], size: int) -> Iterator[EventColumns]:
    """Re-cut a stream of column batches into batches of exactly `size` events (the last shorter)."""
    held: list[EventColumns] = []
    n = 0
    for cols in parts:
        held.append(cols)
        n += len(cols)
        while n >= size:
            joined = EventColumns.concat(held) if len(held) > 1 else held[0]
            yield joined.slice(0, size) if len(joined) > size else joined
            rest = len(joined) - size
            held = [joined.slice(size, len(joined))] if rest else []
            n = rest
    if n:
        yield EventColumns.concat(held) if len(held) > 1 else held[0]
