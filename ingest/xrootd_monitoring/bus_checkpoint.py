"""The checkpoint of `collect --from amqp://`: what lets it ack messages without losing or doubling.

A message's datagram may leave state in the decoder (maps, opens waiting for their close, records
held for ordering) that no event shows yet: acking it after the sink flush alone would lose that
state in a kill. So after every sink flush the collector writes, atomically (tmp + fsync + rename),
the decoder's whole state, how far the output file is written (its size, fsynced) and the digests
of the messages handed out since the last ack; only then does it ack them. A restart restores the
decoder, cuts the output file back to that size (what a killed run wrote after its last checkpoint
comes again from the redelivered messages) and skips the redelivered messages the checkpoint
already holds (a counted duplicate, acked, not decoded again). A kill at any moment therefore
gives every access exactly once:

- before the checkpoint: nothing acked; the output is cut back; the broker redelivers it all;
- after it, before the ack: the redelivered messages match the checkpoint's digests: skipped.

With `--to kafka://` the output cannot be cut back: a kill between a Kafka commit and the
checkpoint after it (a few milliseconds a second) resends that flush's events under the same
identities (cache group, origin, seq), which the store keeps once.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
from collections import deque
from pathlib import Path
from typing import IO

from cachescope.errors import UserError
from ingest.enrich import Enricher
from ingest.pipeline import LineParser
from ingest.xrootd_monitoring.assemble import Assembler
from ingest.xrootd_monitoring.bus import digest

VERSION = 1


def _reduce_parser(p: LineParser):
    state = dict(vars(p))
    state.pop("_on_reject")  # the assembler's callback, bound again on restore (`Checkpoint.load`)
    return _rebuild_parser, (state,)


def _rebuild_parser(state: dict) -> LineParser:
    p = LineParser.__new__(LineParser)
    vars(p).update(state)
    p._on_reject = lambda rec: None
    return p


class _Pickler(pickle.Pickler):
    """The decoder's state without what the run supplies (configuration, classifier, callbacks):
    those are references, bound again to the new run's on restore."""

    def __init__(self, file, shared: dict[int, str]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = shared
        self.dispatch_table = copyreg.dispatch_table.copy()
        self.dispatch_table[LineParser] = _reduce_parser

    def persistent_id(self, obj):
        if isinstance(obj, Enricher):
            # compiled path rules inside: rebuilt from what made it, its numbering kept (its caches go)
            return ("enricher", id(obj), obj.source, obj.site, obj.site_override, obj.seq, obj.origin, obj.clamped)
        return self.shared.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, shared: dict[str, object]):
        super().__init__(file)
        self.shared = shared
        self.enrichers: dict[int, Enricher] = {}

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and pid[0] == "enricher":
            _, key, source, site, site_override, seq, origin, clamped = pid
            e = self.enrichers.get(key)
            if e is None:
                e = self.enrichers[key] = Enricher(source, config=self.shared["config"],
                                                   classifier=self.shared["classifier"], site=site,
                                                   site_override=site_override, seq_start=seq, origin=origin)
                e.clamped = clamped
            return e
        return self.shared[pid]


def _shared(assembler: Assembler) -> dict[str, object]:
    """The assembler's run-supplied attributes by name: its configuration, classifier and callables."""
    out = {}
    for name, value in vars(assembler).items():
        if name in ("config", "classifier") or callable(value):
            out[name] = value
    return out


class Checkpoint:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        #: digests of the messages the checkpoint holds whose ack may not have reached the broker
        self.pending: deque[int] = deque()
        self.out_size: int | None = None
        self._counts: dict | None = None  # the decoder's counters at the last checkpoint

    def load(self, assembler: Assembler) -> bool:
        """Restore `assembler` from the file; False when there is none (a first run)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise UserError(f"checkpoint {self.path}: cannot read it: {exc.strerror or exc}") from None
        shared = _shared(assembler)
        try:
            doc = _Unpickler(io.BytesIO(raw), shared).load()
            if doc.get("version") != VERSION:
                raise ValueError(f"version {doc.get('version')!r}, this collector writes {VERSION}")
        except Exception as exc:  # noqa: BLE001 - a damaged or foreign file
            raise UserError(f"checkpoint {self.path}: not a checkpoint of this collector ({type(exc).__name__}: "
                            f"{exc}); move it away to start afresh (the queue's messages are then decoded "
                            f"without the earlier state)") from None
        for name, value in doc["state"].items():
            setattr(assembler, name, value)
        for st in assembler.streams.values():  # as Assembler._parse binds it
            if getattr(st, "gparser", None) is not None:
                st.gparser._on_reject = lambda rec, origin=st.origin: assembler._parse_reject(origin, rec)
        self.pending = deque(doc["pending"])
        self.out_size = doc["out_size"]
        return True

    def holds(self, body: bytes, redelivered: bool) -> bool:
        """True for a redelivered message the checkpoint holds (its ack was lost)."""
        if not self.pending:
            return False
        if redelivered and self.pending[0] == digest(body):
            self.pending.popleft()
            return True
        self.pending.clear()  # the broker redelivers in order: past the first unheld one, none is held
        return False

    def covering(self, assembler: Assembler, source, out: IO[bytes] | None) -> bool:
        """Checkpoint what `source` handed out (its events flushed to `out`, a regular file, or
        shipped): the output fsynced first. False when nothing changed since the last one."""
        counts = assembler.stats.as_dict()
        if not source.unacked() and counts == self._counts:
            return False
        size = None
        if out is not None:
            os.fsync(out.fileno())
            size = out.tell()
        # the redeliveries still to come that the previous checkpoint holds stay held: the broker
        # gives them after this run's unacked ones if this run dies too
        self.save(assembler, source.unacked() + list(self.pending), size)
        self._counts = counts
        return True

    def commit(self, assembler: Assembler, source, out: IO[bytes] | None) -> None:
        """The checkpoint, then the ack of what it covers."""
        if self.covering(assembler, source, out):
            source.ack_delivered()

    def save(self, assembler: Assembler, handed_out: list[int], out_size: int | None) -> None:
        shared = {id(v): k for k, v in _shared(assembler).items()}
        state = {k: v for k, v in vars(assembler).items() if id(v) not in shared}
        buf = io.BytesIO()
        _Pickler(buf, shared).dump({"version": VERSION, "state": state, "pending": handed_out, "out_size": out_size})
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(buf.getbuffer())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            raise UserError(f"checkpoint {self.path}: cannot write it: {exc.strerror or exc}") from None
        self.out_size = out_size
