"""Cells: the processing core's one sparse counter table.

A row per (window start µs, who, tier) with a row of counters. `who` is a shadow cache (its index
in the bank, with its tier's code and the FIELDS as u64: `cache`) or a server of the real cache
(its name, with the tier's name and OBSERVED_FIELDS as int64: `server`); the same table serves
both. Cells of equal (start, who, tier) add up; `summed` leaves one each, sorted by start, then
who, then tier (names by code point, as sorted()): the form the engine hands cells over in, and
the open windows are kept in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cachescope.simulation import factorize_text, sum_by_key


class Cells:
    __slots__ = ("start", "who", "tier", "values")

    def __init__(self, start: np.ndarray, who: np.ndarray, tier: np.ndarray, values: np.ndarray):
        self.start, self.who, self.tier, self.values = start, who, tier, values

    @property
    def cache(self) -> np.ndarray:
        """`who` of shadow-cache cells: the cache's index in the bank."""
        return self.who

    @property
    def server(self) -> np.ndarray:
        """`who` of the real cache's cells: the server's name."""
        return self.who

    @property
    def n(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls, n_fields: int, values: type = np.uint64, labels: type = np.int64) -> "Cells":
        """No cells: counters of dtype `values`, who and tier of dtype `labels` (object: names)."""
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=labels), np.zeros(0, dtype=labels),
                   np.zeros((0, n_fields), dtype=values))

    @classmethod
    def of(cls, engine: dict[str, np.ndarray]) -> "Cells":
        """The engine's cells (`ShadowBank.feed_cells`), their window numbers in `start`."""
        return cls(engine["window"].astype(np.int64), engine["cache"].astype(np.int64), engine["tier"].astype(np.int64),
                   engine["values"])

    @classmethod
    def concat(cls, parts: list["Cells"]) -> "Cells":
        parts = [p for p in parts if p.n] or parts[:1]
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, k) for p in parts]) for k in cls.__slots__))

    def __getitem__(self, rows: slice | np.ndarray) -> "Cells":
        return Cells(self.start[rows], self.who[rows], self.tier[rows], self.values[rows])

    def summed(self, length: int) -> "Cells":
        """`length`: the windows' length (µs); every start is a multiple of it."""
        if self.n < 2:
            return self
        if self.who.dtype == object:  # names: summed by their codes in sorted order
            w_codes, w_names = _sorted_codes(self.who)
            t_codes, t_names = _sorted_codes(self.tier)
            w_names, t_names = np.asarray(w_names, dtype=object), np.asarray(t_names, dtype=object)
            key = _cell_key(self.start, length, w_codes, len(w_names), t_codes, len(t_names))
        else:
            key = _cell_key(self.start, length, self.who, int(self.who.max()) + 1, self.tier, int(self.tier.max()) + 1)
        # summed in compiled code (numpy's argsort, masks and add.at were a fifth of the replay's
        # main thread); sums wrap past 2^64 as numpy's adds, int64 ones as numpy's int64 adds
        signed = self.values.dtype == np.int64
        at, values = sum_by_key(key, self.values.view(np.uint64) if signed else self.values)
        values = values.view(np.int64) if signed else values
        if self.who.dtype == object:
            return Cells(self.start[at], w_names[w_codes[at]], t_names[t_codes[at]], values)
        return Cells(self.start[at], self.who[at], self.tier[at], values)

    def split(self, closed_before: int | None, length: int) -> tuple["Cells", "Cells"]:
        """Summed cells (sorted by window): (those of windows closed before `closed_before`
        (None: all), the others), as views."""
        if closed_before is None:
            return self, self[:0]
        i = int(np.searchsorted(self.start, closed_before - length, side="right"))
        return self[:i], self[i:]

    @staticmethod
    def add_to_pieces(pieces: list["Cells"], other: "Cells", length: int) -> list["Cells"]:
        """Summed pieces of disjoint windows in window order, plus summed `other`: the same. Only
        the cells of `other` in windows up to the pieces' last are added up, into one piece with
        the earlier pieces; those of later windows stay as they are, as the next piece (a replay's
        batch reaches into the last few open windows and adds hundreds of new ones)."""
        if not other.n:
            return pieces
        i = int(np.searchsorted(other.start, pieces[-1].start[-1], side="right")) if pieces else 0
        if i == 0:  # all in later windows: nothing to add up, nothing copied
            return [*pieces, other]
        head = Cells.concat([*pieces, other[:i]]).summed(length)
        return [head, other[i:]] if i < other.n else [head]

    @staticmethod
    def split_pieces(pieces: list["Cells"], closed_before: int | None,
                     length: int) -> tuple[list["Cells"], list["Cells"]]:
        """`split` of each piece: (the pieces' cells of closed windows, those of open ones), as views."""
        closed, still_open = [], []
        for piece in pieces:
            c, o = piece.split(closed_before, length)
            if c.n:
                closed.append(c)
            if o.n:
                still_open.append(o)
        return closed, still_open

    # ------------------------------------------------------------------ snapshot forms

    def dense(self, starts: set[int], shape: tuple[int, int, int], length: int) -> list[tuple[int, bytes]]:
        """The snapshot form of shadow-cache cells: (start, dense (caches, tiers, fields) u64
        bytes) per open window."""
        c = self.summed(length)
        out = []
        for s in sorted(starts):
            block = np.zeros(shape, dtype=np.uint64)
            m = c.start == s
            block[c.who[m], c.tier[m]] = c.values[m]
            out.append((s, block.tobytes()))
        return out

    @classmethod
    def from_dense(cls, windows: list, shape: tuple) -> tuple["Cells", set[int]]:
        """`dense`'s windows back: their nonzero cells, and the windows' starts."""
        parts = [cls.empty(shape[2])]
        for s, b in windows:
            block = np.frombuffer(b, dtype=np.uint64).reshape(shape)
            c, t = np.nonzero(block.any(axis=2))
            parts.append(cls(np.full(len(c), s, dtype=np.int64), c.astype(np.int64), t.astype(np.int64), block[c, t].copy()))
        return cls.concat(parts), {s for s, _ in windows}

    def items(self) -> list:
        """The snapshot form of named cells: ([start, who, tier], values) per row."""
        return [([int(w), str(s), str(t)], v) for w, s, t, v in
                zip(self.start.tolist(), self.who.tolist(), self.tier.tolist(), self.values.tolist())]

    @classmethod
    def from_items(cls, items: list, n_fields: int) -> "Cells":
        if not items:
            return cls.empty(n_fields, np.int64, object)
        return cls(np.array([k[0] for k, _ in items], dtype=np.int64), np.array([k[1] for k, _ in items], dtype=object),
                   np.array([k[2] for k, _ in items], dtype=object), np.array([v for _, v in items], dtype=np.int64))


def _cell_key(start: np.ndarray, length: int, a: np.ndarray, n_a: int, b: np.ndarray, n_b: int) -> np.ndarray:
    """An int64 key that orders rows by (start, a, b), equal for equal triples: one integer over
    the windows' range (`length` µs; every start a multiple of it) when it fits, else each row's
    rank by the three (windows too far apart)."""
    w = (start - int(start.min())) // length
    if (int(w.max()) + 1) * n_a * n_b < 2**62:
        return (w * n_a + a) * n_b + b
    order = np.lexsort((b, a, start))
    s_, a_, b_ = start[order], a[order], b[order]
    first = np.ones(len(s_), dtype=bool)
    first[1:] = (s_[1:] != s_[:-1]) | (a_[1:] != a_[:-1]) | (b_[1:] != b_[:-1])
    key = np.empty(len(start), dtype=np.int64)
    key[order] = np.cumsum(first) - 1
    return key


def positions(sorted_values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """np.searchsorted(sorted_values, starts) for sorted `starts`: one search per run of equal
    starts (a window's cells are one run), not one per cell."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64)
    firsts = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])
    lengths = np.diff(np.r_[firsts, len(starts)])
    return np.repeat(np.searchsorted(sorted_values, starts[firsts]), lengths)


def _sorted_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize(values, sort=True) of a text column: codes in the values' sorted order and
    the sorted values. The few distinct values are found in compiled code (by object first)."""
    codes, uniques = factorize_text(values)
    if not all(type(u) is str for u in uniques) or (len(codes) and int(codes.min()) < 0):  # not all str
        return pd.factorize(values, sort=True)
    order = sorted(range(len(uniques)), key=uniques.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], np.asarray([uniques[i] for i in order], dtype=object)


# ------------------------------------------------------------------ columns of rows made from cells

def us_to_datetime(us: np.ndarray) -> np.ndarray:
    return np.asarray(us, dtype=np.int64).astype("datetime64[us]")


def constant(n: int, value: str) -> np.ndarray:
    """An object column of one value: the same object n times (np.full makes n new strings, ten
    times slower, and the store's factorize then meets n objects instead of one)."""
    a = np.empty(n, dtype=object)
    a.fill(value)
    return a
