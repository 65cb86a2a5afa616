"""What a real XCache held: whether each access found its file's blocks on the cache's disk.

The cache's own per-access counters cannot say it (XrdPfc counts a block another read was already
fetching as a hit, and a g-stream record can be lost); its purge log can: every file on disk got
there through an earlier access, and leaves it only when a purge removes it (`Purge() Removed
file: 'LFN'` at `pfc.trace dump`; the lab's `purges.py` turns a log into one JSON line per purge
run). So, walking accesses and purges in time order:

* an access finds its file on disk when an earlier access brought it there and no purge removed
  it since (a file the cache held before the walk starts is named in `initial`);
* when the accesses say how many of the file's blocks were on disk after them (the g-stream's
  `n_blks_done` of `n_blks`), an access finds *its* blocks on disk when the file was complete
  before it, or when it added no block (`n_blks_done` did not grow): a partial read that leaves
  the rest for a later read does not make that read a hit;
* a purge at time P removes its files before any access attached at P or later (a file opened
  or accessed since the previous purge is never removed, so a removed file was not in use).

Used on the xcache-lab captures (docs/notes/real-cache.md: the real cache's hit efficiency by its
counters, by its verdict, against this) and by the live real-XCache test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Any, Iterable, Sequence


@dataclass(frozen=True, slots=True)
class CacheAccess:
    """One access of the cache: the file and when it was attached (epoch seconds); optionally
    the blocks on disk after it and the file's blocks (the g-stream record's n_blks_done, n_blks)."""

    lfn: str
    attach: float
    blocks_done: int | None = None
    blocks: int | None = None


@dataclass(frozen=True, slots=True)
class Purge:
    """One purge run: when it ran (epoch seconds) and the files it removed."""

    start: float
    removed: tuple[str, ...]


def purge_record(rec: dict[str, Any], tz: tzinfo = timezone.utc) -> Purge:
    """A purge from one `purges.py` line: `start` (the log's local time, ISO, read on `tz`; or epoch
    seconds) and `files` ([lfn, bytes, access time] each)."""
    start = rec["start"]
    if isinstance(start, str):
        when = datetime.fromisoformat(start)
        start = (when if when.tzinfo else when.replace(tzinfo=tz)).timestamp()
    return Purge(float(start), tuple(f[0] if isinstance(f, (list, tuple)) else f for f in rec.get("files", ())))


def read_purges(lines: Iterable[str], tz: tzinfo = timezone.utc) -> list[Purge]:
    """Purges from `purges.py` JSON lines (blank lines ignored)."""
    return [purge_record(json.loads(line), tz) for line in lines if line.strip()]


def access_of_record(rec: dict[str, Any]) -> CacheAccess:
    """A g-stream file_close record as the access it reports (attach time; blocks after it)."""
    return CacheAccess(rec["lfn"], float(rec.get("attach_t") or rec["detach_t"]), rec.get("n_blks_done"),
                       rec.get("n_blks"))


def _walk(accesses: Sequence[CacheAccess], purges: Iterable[Purge], initial: Iterable[str]):
    """Per access (in the given order): (file on disk, blocks on disk before it: None if not counted)."""
    order = sorted(range(len(accesses)), key=lambda i: accesses[i].attach)  # stable: equal times keep their order
    pending = sorted(purges, key=lambda p: p.start)
    held: dict[str, int | None] = {lfn: None for lfn in initial}  # lfn -> blocks on disk (None: not counted)
    out: list[tuple[bool, int | None]] = [(False, 0)] * len(accesses)
    at = 0
    for i in order:
        a = accesses[i]
        while at < len(pending) and pending[at].start <= a.attach:
            for lfn in pending[at].removed:
                held.pop(lfn, None)
            at += 1
        present = a.lfn in held
        before = held.get(a.lfn)
        out[i] = (present, before if present else 0)
        if a.blocks_done is None:
            held[a.lfn] = before if present else None
        else:
            held[a.lfn] = max(a.blocks_done, before or 0)
    return out


def on_disk(accesses: Sequence[CacheAccess], purges: Iterable[Purge], initial: Iterable[str] = ()) -> list[bool]:
    """Per access (in the given order): were its file's blocks on the cache's disk when it started?"""
    truth = []
    for a, (present, before) in zip(accesses, _walk(accesses, purges, initial)):
        if not present:
            truth.append(False)
        elif before is None or a.blocks_done is None:
            truth.append(True)  # no block counts: the file being there is the answer
        else:
            truth.append((a.blocks is not None and before >= a.blocks) or a.blocks_done <= before)
    return truth


def blocks_on_disk(accesses: Sequence[CacheAccess], purges: Iterable[Purge],
                   initial: Iterable[str] = ()) -> list[int | None]:
    """Per access: how many of its file's blocks (a prefix: reads start at offset 0 here) were on
    disk when it started (None: the file was, but no block counts say how much) — the bytes a
    read served from the cache, for the transfer efficiency's truth."""
    return [before for _, before in _walk(accesses, purges, initial)]


def hit_efficiency(hits: Iterable[bool]) -> float:
    flags = list(hits)
    return sum(flags) / len(flags) if flags else float("nan")
