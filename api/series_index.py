"""An in-process columnar copy of the hour and day efficiency tables, for GET /v1/efficiency.

Why: a series query costs 5–25 ms in chDB (planning, FINAL, then 20–45 ms more for its DataFrame
output), and chDB answers one query at a time per process: 16 dashboard clients queue behind each
other (p95 0.4–1.5 s). The hour and day tables are small (30 days × 24 caches × 8 tiers = 138,240
hour rows) and change rarely (the core writes an hour's rows when the hour closes), so `serve`
keeps their rows — `reads.efficiency_rows`: FINAL, summed over shards and runs, the same sums the
read layer makes — as numpy columns, and answers a series with a few vectorised operations
(about 1 ms) and no query at all.

Exactly the read layer's answer (tests/python/unit/api/test_api.py compares them on both backends):
same filters (window_start in [from, to), empty list = all), buckets `toStartOfInterval(ws, step)`
(epoch-aligned seconds), integer sums, `hits / requests` in float64 (NaN for no requests), rows
ordered by (cache_group, policy, size_bytes, tier_key, time).

Fresh: before answering, at most once per `check_seconds`, the table's active parts are looked at
(`reads.table_version`, ~2 ms); any insert, merge or mutation reloads the copy (single-flight:
other requests wait for it; a whole reload: 138 k rows take 0.2–0.5 s, mostly the store's query,
and a table written while served pays that once per write). A table above `max_rows` is not copied (the read layer
answers); a copy takes about 200 bytes a row (two sorted orders of the counters).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import orjson
import pandas as pd

from cachescope import reads
from cachescope.store import Store

COUNTERS = ("requests", "hits", "bytes_requested", "bytes_hit", "bytes_filled", "evictions", "delayed_hits",
            "bytes_delayed")
#: series id · 2^32 + window start (Unix seconds < 2^32): one sorted key per ordering
_SHIFT = np.int64(1 << 32)


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct names, code of each value): codes ordered as the names are."""
    # a hash table, then a sort of the few distinct names: np.unique sorted every row's string
    # (70 % of a copy's load; the same names and codes)
    codes, names = pd.factorize(values, sort=True, use_na_sentinel=False)
    if values.dtype == object:
        names = np.asarray(names, dtype=object).astype(str)
        if len(np.unique(names)) != len(names):  # values that differ only as objects: as before
            names, codes = np.unique(values.astype(str), return_inverse=True)
    return np.asarray(names), codes.astype(np.int64)


def _placed(places: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """_codes for values given as 1-based places in the sorted `names`: the names that occur, and
    each value's code among them (as _codes gives them)."""
    codes, used = pd.factorize(places.astype(np.int64), sort=True)
    return np.asarray(list(names), dtype=str)[used - 1] if len(used) else np.zeros(0, dtype=str), codes.astype(np.int64)


def _wanted(names: np.ndarray, asked: Sequence) -> np.ndarray | None:
    """Codes of the asked names that exist (None: all); names compare as the store compares them."""
    if not asked:
        return None
    asked = np.asarray(list(asked), dtype=names.dtype if names.dtype != object else str)
    return np.flatnonzero(np.isin(names, asked))


@dataclass
class _Ordering:
    """Rows sorted by (series, ws[, tier]); `series` numbers distinct keys in sorted order."""

    key: np.ndarray  # series · 2^32 + ws, ascending
    series_cols: tuple[np.ndarray, ...]  # per series: the key's codes (cache_group, policy, size[, tier])
    ws: np.ndarray  # the rows' columns in this order (a selection is then contiguous ranges)
    tier: np.ndarray
    counters: dict[str, np.ndarray]


def _sort_order(cols: tuple[np.ndarray, ...], ws: np.ndarray, tier: np.ndarray) -> np.ndarray:
    """The rows' order by (*cols, ws, tier): the tier breaks ties after ws in the tiers-summed order."""
    # one int64 key (codes mixed in radix order, then ws in the low 32 bits) sorted stably is the
    # same permutation as a lexsort of the keys, at a fraction of its cost
    keys = (*cols, tier)
    span = 1
    for c in keys:
        span *= int(c.max()) + 1 if len(c) else 1
    if len(ws) and (span >= 1 << 31 or int(ws.min()) < 0 or int(ws.max()) >= 1 << 32):
        return np.lexsort((tier, ws, *reversed(cols)))  # does not fit one key
    key = np.zeros(len(ws), dtype=np.int64)
    for c in cols:
        key = key * (int(c.max()) + 1 if len(c) else 1) + c
    key = (key << 32 | ws) * (int(tier.max()) + 1 if len(tier) else 1) + tier
    return np.argsort(key, kind="stable")


class TableCopy:
    """One table's windows as numpy columns, with two sorted orderings: by (cache_group, policy,
    size, tier, ws) for series by tier, by (cache_group, policy, size, ws) for tiers summed."""

    def __init__(self, df: pd.DataFrame, version: tuple, names: dict[str, Sequence[str]] | None = None):
        """`df`: rows of the table (several per window when shards or runs are apart: summed here);
        with `names`, its cache_group, policy and tier are 1-based places in those sorted lists
        (reads.efficiency_rows), else the names themselves."""
        self.version = version
        ws = df["ws"].to_numpy().astype(np.int64)
        if names is None:
            self.groups, g = _codes(df["cache_group"].to_numpy(dtype=object))
            self.policies, p = _codes(df["policy"].to_numpy(dtype=object))
            self.tiers, t = _codes(df["tier"].to_numpy(dtype=object))
        else:
            self.groups, g = _placed(df["cache_group"].to_numpy(), names["cache_group"])
            self.policies, p = _placed(df["policy"].to_numpy(), names["policy"])
            self.tiers, t = _placed(df["tier"].to_numpy(), names["tier"])
        self.sizes, s = _codes(df["size_bytes"].to_numpy().astype(np.uint64))
        counters = {c: df[c].to_numpy().astype(np.uint64) for c in COUNTERS}
        # one row per (cache_group, policy, size, tier, window): the shards' and runs' rows summed
        perm = _sort_order((g, p, s, t), ws, t)
        cols = [c[perm] for c in (g, p, s, t, ws)]
        same = np.ones(max(len(perm) - 1, 0), dtype=bool)
        for c in cols:
            same &= c[1:] == c[:-1]
        at = np.flatnonzero(np.concatenate(([True], ~same))) if len(perm) else np.zeros(0, np.int64)
        g, p, s, t, self.ws = (c[at] for c in cols)
        self.counters = {c: (np.add.reduceat(v[perm], at) if len(at) else v[:0]) for c, v in counters.items()}
        self.rows = len(self.ws)
        self.codes = {"cache_group": g, "policy": p, "size": s, "tier": t}
        self.by_tier = self._ordering((g, p, s, t))
        self.summed = self._ordering((g, p, s))
        del self.counters  # kept in each ordering's row order only

    def _ordering(self, cols: tuple[np.ndarray, ...]) -> _Ordering:
        perm = _sort_order(cols, self.ws, self.codes["tier"])
        sorted_cols = [c[perm] for c in cols]
        change = np.zeros(len(perm), dtype=bool)
        if len(perm):
            change[0] = True
            for c in sorted_cols:
                change[1:] |= c[1:] != c[:-1]
        sid = np.cumsum(change) - 1
        first = np.flatnonzero(change)
        ws = self.ws[perm]
        return _Ordering(sid * _SHIFT + ws, tuple(c[first] for c in sorted_cols), ws, self.codes["tier"][perm],
                         {c: v[perm] for c, v in self.counters.items()})

    def knows(self, *, cache_groups: Sequence[str] = (), policies: Sequence[str] = (),
              tiers: Sequence[str] = ()) -> bool:
        """Whether every asked name is in this table (else the store says whether it is a typo)."""
        return all(not asked or set(map(str, asked)) <= set(map(str, names.tolist()))
                   for names, asked in ((self.groups, cache_groups), (self.policies, policies), (self.tiers, tiers)))

    def series_count(self, start: dt.datetime, end: dt.datetime, *, cache_groups: Sequence[str] = (),
                     policies: Sequence[str] = (), sizes: Sequence[int] = (), tiers: Sequence[str] = (),
                     by_tier: bool = False) -> int:
        """How many series an answer of [start, end) with these filters holds (an upper bound when
        tiers are summed over some of them), before building it."""
        o, sids, lo_s, hi_s, want_tiers = self._series(start, end, cache_groups, policies, sizes, tiers, by_tier)
        lo = np.searchsorted(o.key, sids * _SHIFT + lo_s)
        hi = np.searchsorted(o.key, sids * _SHIFT + max(lo_s, hi_s))
        return int(np.count_nonzero(hi > lo))

    def _series(self, start, end, cache_groups, policies, sizes, tiers, by_tier):
        o = self.by_tier if by_tier else self.summed
        keep = np.ones(len(o.series_cols[0]) if o.series_cols else 0, dtype=bool)
        for col, names, asked in ((0, self.groups, cache_groups), (1, self.policies, policies),
                                  (2, self.sizes, [int(x) for x in sizes])):
            want = _wanted(names, asked)
            if want is not None:
                keep &= np.isin(o.series_cols[col], want)
        want_tiers = _wanted(self.tiers, tiers)
        if by_tier and want_tiers is not None:
            keep &= np.isin(o.series_cols[3], want_tiers)
        sids = np.flatnonzero(keep).astype(np.int64)
        # window_start (seconds) ≥ from (µs) ⇔ ws ≥ ⌈from⌉; < to ⇔ ws < ⌈to⌉
        lo_s, hi_s = -(-_us(start) // 1_000_000), -(-_us(end) // 1_000_000)
        return o, sids, lo_s, hi_s, want_tiers

    def _select(self, start: dt.datetime, end: dt.datetime, step_s: int, cache_groups: Sequence[str],
                policies: Sequence[str], sizes: Sequence[int], tiers: Sequence[str], by_tier: bool,
                counters: Sequence[str]) -> "_Answer":
        o, sids, lo_s, hi_s, want_tiers = self._series(start, end, cache_groups, policies, sizes, tiers, by_tier)
        lo = np.searchsorted(o.key, sids * _SHIFT + lo_s)
        hi = np.searchsorted(o.key, sids * _SHIFT + max(lo_s, hi_s))
        n = hi - lo
        total = int(n.sum())
        # the positions of every selected range, concatenated (no Python loop over series)
        pos = np.arange(total, dtype=np.int64) + np.repeat(lo - np.concatenate(([0], np.cumsum(n)[:-1])), n)
        sid = np.repeat(sids, n)
        if not by_tier and want_tiers is not None:
            m = np.isin(o.tier[pos], want_tiers)
            pos, sid = pos[m], sid[m]
        rows = pos
        # toStartOfInterval(window_start, INTERVAL step SECOND): epoch-aligned
        bucket = o.ws[rows] // step_s * step_s
        change = np.ones(len(rows), dtype=bool)
        if len(rows):
            change[1:] = (sid[1:] != sid[:-1]) | (bucket[1:] != bucket[:-1])
        at = np.flatnonzero(change)
        sums = {c: (np.add.reduceat(o.counters[c][rows], at) if len(at) else np.zeros(0, np.uint64))
                for c in counters}
        return _Answer(self, o, by_tier, bucket[at], sid[at], sums)

    def series(self, start: dt.datetime, end: dt.datetime, step_s: int, *, cache_groups: Sequence[str] = (),
               policies: Sequence[str] = (), sizes: Sequence[int] = (), tiers: Sequence[str] = (),
               by_tier: bool = False) -> pd.DataFrame:
        """reads.efficiency_series over this table, from the copy (the same columns and values)."""
        return self._select(start, end, step_s, cache_groups, policies, sizes, tiers, by_tier, COUNTERS).frame()

    def series_json(self, start: dt.datetime, end: dt.datetime, step_s: int, *, cache_groups: Sequence[str] = (),
                    policies: Sequence[str] = (), sizes: Sequence[int] = (), tiers: Sequence[str] = (),
                    by_tier: bool = False) -> list[dict]:
        """The same as api.routes.efficiency.columnar_series(series(...)) once written by dumps(),
        without a DataFrame."""
        return self._select(start, end, step_s, cache_groups, policies, sizes, tiers, by_tier, JSON_COUNTERS).json()


#: the counters an answer of GET /v1/efficiency lists
JSON_COUNTERS = ("requests", "hits", "bytes_requested", "bytes_hit", "delayed_hits", "bytes_delayed")


@dataclass
class _Answer:
    """Buckets in answer order: time (Unix seconds), series id, summed counters."""

    copy: TableCopy
    order: _Ordering
    by_tier: bool
    time: np.ndarray
    sid: np.ndarray
    sums: dict[str, np.ndarray]

    def efficiencies(self) -> tuple[np.ndarray, np.ndarray]:
        # as ClickHouse: Float64 division of the sums, NaN for no requests
        s = self.sums
        with np.errstate(divide="ignore", invalid="ignore"):
            hit = np.where(s["requests"] == 0, np.nan, s["hits"].astype(np.float64) / s["requests"].astype(np.float64))
            tr = np.where(s["bytes_requested"] == 0, np.nan,
                          s["bytes_hit"].astype(np.float64) / s["bytes_requested"].astype(np.float64))
        return hit, tr

    def frame(self) -> pd.DataFrame:
        c, cols, n = self.copy, self.order.series_cols, len(self.sid)
        hit, tr = self.efficiencies()
        return pd.DataFrame({
            "time": pd.to_datetime(self.time, unit="s", utc=True),
            "cache_group": c.groups[cols[0][self.sid]].astype(object),
            "policy": c.policies[cols[1][self.sid]].astype(object),
            "size_bytes": c.sizes[cols[2][self.sid]],
            "tier_key": c.tiers[cols[3][self.sid]].astype(object) if self.by_tier else np.full(n, "ALL", dtype=object),
            **self.sums, "hit_efficiency": hit, "transfer_efficiency": tr,
        })

    def json(self) -> list[dict]:
        """Series as columnar objects of numpy slices: orjson writes them natively (with
        OPT_SERIALIZE_NUMPY | OPT_NAIVE_UTC: times as `…T00:00:00+00:00`, NaN as null), no Python
        object per point."""
        c, cols, n = self.copy, self.order.series_cols, len(self.sid)
        if not n:
            return []
        first = np.flatnonzero(np.concatenate(([True], self.sid[1:] != self.sid[:-1])))
        bounds = np.append(first, n).tolist()
        arrays = {"time": self.time.astype("datetime64[s]"), **self.sums}
        arrays["hit_efficiency"], arrays["transfer_efficiency"] = self.efficiencies()
        out = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            s = int(self.sid[a])
            row = {"cache_group": str(c.groups[cols[0][s]]), "policy": str(c.policies[cols[1][s]]),
                   "size_bytes": int(c.sizes[cols[2][s]]), "tier": str(c.tiers[cols[3][s]]) if self.by_tier else "ALL"}
            for k, v in arrays.items():
                row[k] = v[a:b]
            out.append(row)
        return out


#: orjson's options for an answer holding series_json(...)
DUMPS_OPTION = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NAIVE_UTC


def dumps(payload) -> bytes:
    """JSON of an answer holding series_json(...)."""
    return orjson.dumps(payload, option=DUMPS_OPTION)


def _us(t: dt.datetime) -> int:
    t = t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


class SeriesIndex:
    """Copies of efficiency_hourly and efficiency_daily, kept fresh; `series(...)` answers from
    them or returns None (the minute table, a table above max_rows: ask the read layer)."""

    def __init__(self, *, max_rows: int = 1_000_000, check_seconds: float = 1.0):
        self.max_rows, self.check_seconds = max_rows, check_seconds
        self._copies: dict[str, TableCopy | None] = {}
        self._checked: dict[str, float] = {}
        self._lock = threading.Lock()
        self._asked: dict[str, float] = {}  # when a request last asked for each copy
        self.loads = 0
        #: notified after each load and after keep_fresh's first round (`warm`)
        self.loaded = threading.Condition()
        self.warm = False

    def keep_fresh(self, stores, idle_seconds: float = 300.0) -> threading.Event:
        """`serve`: load the copies now and check them every check_seconds while they were asked for
        in the last idle_seconds, in a thread of their own, so that the first answer and the first
        after a write find the copy loaded (a load is 50–150 ms of store query and sort). Set the
        event returned to stop it."""
        stop = threading.Event()
        tables = list(reads.EFFICIENCY_ROWS)

        def run():
            first = True
            while not stop.is_set():
                for table in tables:
                    if first or time.monotonic() - self._asked.get(table, -1e9) < idle_seconds:
                        try:
                            with stores.get() as store:
                                self.copy_of(store, table, asked=False)
                        except Exception:  # the store away: a request says so; try again later
                            pass
                if first:
                    with self.loaded:
                        self.warm = True
                        self.loaded.notify_all()
                first = False
                stop.wait(max(self.check_seconds, 0.05))

        threading.Thread(target=run, name="series-copy", daemon=True).start()
        return stop

    def fresh(self, table: str | None) -> TableCopy | None:
        """The copy of `table` when it was checked less than check_seconds ago (no I/O), else None."""
        if table is not None:
            self._asked[table] = time.monotonic()
        if table is None or time.monotonic() - self._checked.get(table, -1e9) >= self.check_seconds:
            return None
        return self._copies.get(table)

    def copy_of(self, store: Store, table: str, asked: bool = True) -> TableCopy | None:
        """The copy of `table`, checked (and reloaded) through `store`, the caller's connection."""
        if self.max_rows <= 0 or table not in reads.EFFICIENCY_ROWS:
            return None
        now = time.monotonic()
        if asked:
            self._asked[table] = now
        if table in self._copies and now - self._checked.get(table, -1e9) < self.check_seconds:
            return self._copies[table]
        with self._lock:  # single-flight: one check (and reload) at a time, the others wait for it
            if table in self._copies and time.monotonic() - self._checked.get(table, -1e9) < self.check_seconds:
                return self._copies[table]
            version = reads.table_version(store, table)  # first: a change after it reloads next time
            have = self._copies.get(table)
            if have is None or have.version != version:
                if version and version[0] > self.max_rows:
                    have = None  # too large to copy (counted with duplicates: an upper bound)
                else:
                    rows, names = reads.efficiency_rows(store, table)
                    have = TableCopy(rows, version, names)
                    self.loads += 1
                self._copies[table] = have
            self._checked[table] = time.monotonic()
        with self.loaded:
            self.loaded.notify_all()
        return have

    def series(self, store: Store, start: dt.datetime, end: dt.datetime, step_s: int,
               **filters) -> pd.DataFrame | None:
        copy = self.copy_of(store, reads.table_for_step(step_s))
        return None if copy is None else copy.series(start, end, step_s, **filters)

    def series_json(self, store: Store, start: dt.datetime, end: dt.datetime, step_s: int,
                    **filters) -> list[dict] | None:
        copy = self.copy_of(store, reads.table_for_step(step_s))
        return None if copy is None else copy.series_json(start, end, step_s, **filters)
