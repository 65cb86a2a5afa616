"""What a real XCache did for each client read, from its own block log (issue 36): the events
tests/python/support/xcache_blocklog.py (../shared/xcache-lab/blocklog.py) takes from a `pfc.trace dump`
log, in the order XrdPfc logged them.

A read's verdict is taken where its first request reaches XrdPfc (the log's `Read()` of its
first offset: its open, as far as the cache is concerned), over every block the read touches
(all its ranges): a **hit** when each was on disk (written) by then, a **delayed hit** when none
needed a new fetch but some were still on their way from the origin (asked for, not yet
written), a **miss** when some had not been asked for. Times in the log are whole seconds, so
the log's order, not its clock, decides.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Verdict:
    path: str
    line: int  # where the read's first request is in the log
    blocks: int
    on_disk: int
    in_flight: int

    @property
    def hit(self) -> bool:
        return self.on_disk == self.blocks

    @property
    def delayed(self) -> bool:
        return not self.hit and self.on_disk + self.in_flight == self.blocks


def ranges_of(read: dict) -> list[tuple[int, int]]:
    """(offset, length) of a client read as the lab's workload writes it: its `offsets`
    (`off+len ...`) for a partial read, else from the file's start as far as it read (python3-xrootd
    5.5's whole-file read of a file above 8 MiB stops after its first 8 MiB + 4 KiB)."""
    if read["method"] == "partial":
        return [(int(o), int(n)) for o, n in (x.split("+") for x in read["offsets"].split())]
    return [(0, int(read["bytes_read"]))]


def verdicts(blocklog: Path, reads: list[dict], block: int) -> list[Verdict | None]:
    """One verdict per client read, `reads` by start time (the order their first requests are
    matched in, for reads of one file at one offset); None: no request of it in the log."""
    lines = blocklog.read_text().splitlines()
    paths = json.loads(lines[0])[1]
    written: dict[tuple[int, int], int] = {}
    asked: dict[tuple[int, int], int] = {}
    requests: dict[tuple[int, int], deque[int]] = defaultdict(deque)
    for text in lines[1:]:
        ev = json.loads(text)
        n, kind = ev[0], ev[2]
        if kind == "written":
            written.setdefault((ev[3], ev[4]), n)
        elif kind == "fetch":
            asked.setdefault((ev[3], ev[4]), n)
        elif kind == "req":
            requests[(ev[3], ev[5])].append(n)
        elif kind == "removed":  # a purge would need on-disk state over time: not in this workload
            raise ValueError(f"{blocklog}: a purge removed {paths[ev[3]]}; this truth assumes none")
    pid = {p: i for i, p in enumerate(paths)}
    out: list[Verdict | None] = []
    for r in reads:
        rngs = ranges_of(r)
        p = pid.get(r["path"])
        queue = requests.get((p, rngs[0][0])) if p is not None else None
        if not queue:
            out.append(None)
            continue
        at = queue.popleft()
        idx = sorted({i for off, ln in rngs if ln > 0 for i in range(off // block, (off + ln - 1) // block + 1)})
        disk = sum(written.get((p, i), at) < at for i in idx)
        flight = sum(asked.get((p, i), at) < at <= written.get((p, i), at) for i in idx)
        out.append(Verdict(r["path"], at, len(idx), disk, flight))
    return out
