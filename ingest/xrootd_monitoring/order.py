"""The packet order of one server stream: duplicates, the reorder window, sequence gaps.

Each stream kind (g, f, and the counter the detailed monitor's maps and trace share) numbers its
datagrams with an 8-bit `pseq`. A datagram's *position* is its pseq unwrapped against the
highest one seen of its kind (at most 127 either way), so the order survives the wrap.

* A datagram whose bytes equal the last one seen under its number (same sender, start time,
  kind and pseq: the stream) is a duplicate, dropped and counted, also long after it was first
  decoded (the last 256 numbers of each kind are remembered by an xxh3 digest).
* The window: each arrival takes a slot in the stream's arrival order; the head slot goes out as
  the lowest waiting datagram of its kind, at once when it follows the last one of its kind out
  (no gap), else once the window passes it (`count` more arrivals of the stream or `seconds`
  since it arrived, or the collector's budget): a datagram arriving within the window takes its
  place in order, and a gap still open then counts as lost. Slots keep the interleaving of the
  kinds (a path map before the f-stream open that names it) while each kind is sorted.
* A datagram behind what already went out is late: dropped and counted (its gap was counted as
  lost; decoding it now could count an access twice). A g/f datagram behind by its number but
  ahead by its own clock (tBeg after the last one's tEnd) is a jump of 128 and more (a burst of
  loss), not a late one; without a clock, `RESYNC` late ones in a row are taken as such a jump.

Only arrival order and the arrival times given are used, so the same datagrams with the same
times give the same output however often it is asked for (a spool replays them so).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import xxhash

NEW, DUPLICATE, LATE, REUSED = "new", "duplicate", "late", "reused"
#: late datagrams in a row (of a kind without a clock) taken as a jump of the sequence
RESYNC = 8


@dataclass(slots=True)
class Item:
    """A datagram waiting in the window."""

    kind: str
    data: bytes
    payload: object  # what the assembler decodes it from (binary header, or the text packet)
    tend: int  # its own clock (g/f: tEnd), 0: none


@dataclass(slots=True)
class Slot:
    kind: str
    n: int  # the stream's arrival number
    arrived: float  # arrival time (s)
    behind: bool = False  # it came after a later datagram of its kind (and takes its place before it)
    done: bool = False


@dataclass(slots=True)
class KindOrder:
    top: int | None = None  # highest position taken
    last: int | None = None  # last position out
    last_tend: int = 0  # clock of the last datagram out (g/f)
    late_run: int = 0
    pending: dict[int, Item] = field(default_factory=dict)  # position -> datagram
    seen: dict[int, int] = field(default_factory=dict)  # pseq -> digest of the latest datagram of that number


class Window:
    """One server stream's reorder window, across its kinds."""

    __slots__ = ("kinds", "slots", "arrivals", "bytes")

    def __init__(self) -> None:
        self.kinds: dict[str, KindOrder] = {}
        self.slots: deque[Slot] = deque()
        self.arrivals = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.slots)

    def offer(self, kind: str, pseq: int, data: bytes, payload: object, now: float,
              tbeg: int = 0, tend: int = 0) -> tuple[str, Slot | None]:
        """(NEW, its slot) when it waits in the window; (DUPLICATE | LATE | REUSED, None) when dropped."""
        ko = self.kinds.get(kind)
        if ko is None:
            ko = self.kinds[kind] = KindOrder()
        digest = xxhash.xxh3_64_intdigest(data)
        if ko.seen.get(pseq) == digest:
            return DUPLICATE, None
        if ko.top is None:
            pos = pseq
        else:
            pos = ko.top + ((pseq - ko.top + 128) & 0xFF) - 128
            if ko.last is not None and pos <= ko.last:
                ahead = tbeg > ko.last_tend if tbeg and ko.last_tend else ko.late_run + 1 >= RESYNC
                if not ahead:
                    ko.late_run += 1
                    return LATE, None
                pos = ko.top + (((pseq - ko.top) & 0xFF) or 256)
            if pos in ko.pending:
                return REUSED, None  # its number waits with other bytes
        ko.late_run = 0
        behind = ko.top is not None and pos < ko.top
        ko.top = pos if ko.top is None else max(ko.top, pos)
        ko.seen[pseq] = digest
        ko.pending[pos] = Item(kind, data, payload, tend)
        self.arrivals += 1
        self.bytes += len(data)
        slot = Slot(kind, self.arrivals, now, behind)
        self.slots.append(slot)
        return NEW, slot

    def release(self, now: float, count: int, seconds: float, force: int = 0) -> list[tuple[Item, int]]:
        """The datagrams that go out now, in order, each with the gap (datagrams lost) before it;
        `force` head slots go out whatever the window says (closing, the budget)."""
        out: list[tuple[Item, int]] = []
        slots = self.slots
        while slots:
            slot = slots[0]
            ko = self.kinds[slot.kind]
            pos = min(ko.pending)
            if not (force > 0 or (ko.last is not None and pos == ko.last + 1)
                    or self.arrivals - slot.n >= count or now - slot.arrived >= seconds):
                break
            force -= 1
            slots.popleft()
            slot.done = True
            item = ko.pending.pop(pos)
            gap = pos - ko.last - 1 if ko.last is not None else 0
            ko.last = pos
            if item.tend:
                ko.last_tend = item.tend
            self.bytes -= len(item.data)
            out.append((item, gap))
        return out
