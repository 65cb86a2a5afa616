"""Python face of the compiled engine (cachescope._simcore): banks, traces, curves (cache specs and
whole-file runs are in specs.py, which needs no numpy).

Everything here hands whole numpy columns to Rust; no per-event Python runs on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from cachescope.engine import _simcore
# the numpy-free part, here too so that callers import the engine's face from one place
from cachescope.specs import (FIELDS, MAX_CAPACITY, MESSAGE_FIELDS, OP_BYPASS, OP_DELETE, OP_READ,  # noqa: F401
                              OP_WRITE, POLICIES, SNAPSHOT_VERSION, TRACE_FORMATS, BillingFast, CacheSpec, F,
                              GstreamColumns, PathTiers, TraceError, check_specs, decode_message, factorize_str,
                              in_engine_thread, partition_of, ratios, simulate_file, stacked_columns)


def _columns(file_id, file_size, bytes_read, tier, op) -> tuple:
    """A batch's five columns, one tuple in the dtypes the engine reads (no copy when they
    already are)."""
    return (
        np.ascontiguousarray(file_id, dtype=np.uint64),
        np.ascontiguousarray(file_size, dtype=np.uint64),
        np.ascontiguousarray(bytes_read, dtype=np.uint64),
        np.ascontiguousarray(tier, dtype=np.uint8),
        np.ascontiguousarray(op, dtype=np.uint8),
    )


def _col(values, dtype) -> np.ndarray | None:
    return None if values is None else np.ascontiguousarray(values, dtype=dtype)


def _clock(seconds) -> np.ndarray:
    """Event times in seconds (a trace's timestamp column) as the engine's u32 seconds."""
    return np.clip(np.nan_to_num(np.asarray(seconds, dtype=np.float64)), 0, 2**32 - 1).astype(np.uint32)


def _seconds(ts_us) -> np.ndarray:
    """Event times (µs) as the engine's u32 seconds (clipped to 1970..2106)."""
    return np.clip(np.asarray(ts_us, dtype=np.int64) // 1_000_000, 0, 2**32 - 1).astype(np.uint32)


class ShadowBank:
    """A bank of shadow caches over one event stream (the compiled `Bank`).

    Admission: a read fed with op `OP_BYPASS` is one the cache does not admit: a request and a
    miss of its tier in every cache that samples its file, never inserted, changing nothing.
    `partitions=N`: each spec is split into N caches, one per partition of the `partition`
    column every batch then carries (e.g. each access's server), partition i's capacity
    `capacity_share(capacity, N, i)`; counters come back summed per spec (`feed_by_partition`:
    also per partition). `salt`: file ids are multiplied by this odd number first (a bijection:
    the sampled caches draw another hash sample)."""

    def __init__(self, specs: Sequence[CacheSpec], n_tiers: int = 64, *, partitions: int | None = None, salt: int = 0,
                 threads: int = 0, _engine=None):
        self.specs = list(specs)
        self.n_tiers = n_tiers
        self.partitions = partitions
        # threads: a batch's caches run on that many (0: every core; 1: the calling thread), the
        # same counts on any number
        self._bank = _engine if _engine is not None else _simcore.Bank([s.as_engine() for s in self.specs], n_tiers,
                                                                        partitions, salt, int(threads))

    def feed(self, file_id, file_size, bytes_read, tier, op, next_access=None, window=None, ts=None,
             partition=None, duration_us=None) -> np.ndarray:
        """Counters of this batch shaped (windows, caches, tiers, fields). `ts` (event time in
        microseconds since the epoch) makes the caches count residence ages, in seconds;
        `partition`: each event's partition (0-based), for a bank made with `partitions`;
        `duration_us`: each access's duration (µs, 0 = not known), xcache's fetch times."""
        return self._bank.feed(_columns(file_id, file_size, bytes_read, tier, op), _col(next_access, np.uint64),
                               _col(window, np.uint32), None if ts is None else _seconds(ts), _col(partition, np.uint32),
                               False, _col(duration_us, np.uint64))

    def feed_by_partition(self, file_id, file_size, bytes_read, tier, op, partition, next_access=None,
                          window=None, ts=None, duration_us=None) -> tuple[np.ndarray, np.ndarray]:
        """`feed` of a bank made with `partitions`: the counters summed over the partitions, and
        those of each partition summed over the windows, shaped (partitions, caches, tiers, fields)."""
        return self._bank.feed(_columns(file_id, file_size, bytes_read, tier, op), _col(next_access, np.uint64),
                               _col(window, np.uint32), None if ts is None else _seconds(ts),
                               _col(partition, np.uint32), True, _col(duration_us, np.uint64))

    def feed_cells(self, file_id, file_size, bytes_read, tier, op, window, next_access=None,
                   tiers_used: int | None = None, ts=None, parallel: bool = True,
                   duration_us=None) -> dict[str, np.ndarray]:
        """Feed a batch (`window`: each event's window number, < 2^32); returns only the counter
        cells it touched: dict(window, cache, tier, values (cells, fields) u64), sorted by
        (window, cache, tier). `tiers_used`: every tier code fed so far (this batch's and the
        evicted files') is below it, which lets the engine count in a small flat block. `ts`
        (event times, µs) makes the caches count residence ages, as `feed`. `parallel=False` runs
        the caches one after the other in this thread: for a caller whose other threads need the
        second core more (the same cells either way)."""
        return self._bank.feed_cells(_columns(file_id, file_size, bytes_read, tier, op), _col(window, np.uint32),
                                     _col(next_access, np.uint64), tiers_used, None if ts is None else _seconds(ts),
                                     parallel, _col(duration_us, np.uint64))

    def feed_totals(self, file_id, file_size, bytes_read, tier, op, next_access=None, clock=None,
                    duration_us=None) -> None:
        """Feed a batch into the exact totals only (no per-window counters). `clock`: event
        times in seconds for the caches that run on them (`needs_clock`: xcache's purges);
        `duration_us`: each access's duration (µs, 0 = not known), xcache's fetch times."""
        self._bank.feed_totals(_columns(file_id, file_size, bytes_read, tier, op), _col(next_access, np.uint64),
                               None if clock is None else _clock(clock), _col(duration_us, np.uint64))

    @property
    def needs_clock(self) -> bool:
        return self._bank.needs_clock

    def seed(self, cache: int, files: Sequence[tuple[int, int, int]]) -> None:
        """Warm start of cache `cache` (an xcache, before its first read) with the files a real
        cache holds: (file_id, cached bytes, last access in epoch seconds), e.g. from
        `cachescope.xrdpfc.read_seed`."""
        ids, cached, last = (np.array(c, dtype=d) for c, d in
                             zip(zip(*files) if files else ([], [], []), (np.uint64, np.uint64, np.uint32)))
        self._bank.seed(cache, ids, cached, last)

    def purge_log(self, cache: int) -> list[list[dict]]:
        """An xcache's last purges (at most 1024 per partition), oldest first."""
        return self._bank.purge_log(cache)

    def totals(self) -> np.ndarray:
        """Cumulative counters shaped (caches, tiers, fields): exact Python ints (dtype object),
        since byte sums of a trace can exceed u64. Per-window counters from `feed` are u64."""
        flat = np.empty(len(self.specs) * self.n_tiers * len(FIELDS), dtype=object)
        flat[:] = self._bank.totals()
        return flat.reshape(len(self.specs), self.n_tiers, len(FIELDS))

    def occupancy(self) -> list[tuple[int, int]]:
        return self._bank.occupancy()

    @property
    def needs_future(self) -> bool:
        return self._bank.needs_future

    def snapshot(self) -> bytes:
        return self._bank.snapshot()

    @classmethod
    def restore(cls, data: bytes) -> "ShadowBank":
        engine = _simcore.Bank.restore(data)
        specs = [CacheSpec(**s) for s in engine.specs()]
        return cls(specs, engine.n_tiers, _engine=engine)


@dataclass
class Trace:
    """Columns of a simulator trace (one read per row)."""

    timestamp: np.ndarray
    file_id: np.ndarray
    file_size: np.ndarray
    bytes_read: np.ndarray
    tier: np.ndarray
    tier_names: list[str]
    error: str | None = None  # the input was damaged: the rows are those read before the damage

    def __len__(self) -> int:
        return len(self.file_id)

    def working_set(self) -> int:
        """Bytes of distinct files (each at its first-seen size)."""
        _, first = np.unique(self.file_id, return_index=True)
        return exact_sum(self.file_size[first])


def next_access_times(file_id, op=None, partition=None) -> np.ndarray:
    """Belady's next-access times: for each row, the place of the next row of the same file
    (u64 max: none). With `op`, rows of op `OP_BYPASS` reach no cache and are not counted; with
    `partition`, each partition's rows are a stream of their own, numbered from 0 in it (what
    the caches of a bank made with `partitions` see)."""
    return _simcore.next_access_times(np.ascontiguousarray(file_id, dtype=np.uint64), _col(op, np.uint8),
                                      _col(partition, np.uint32))


def capacity_share(capacity: int, parts: int, index: int) -> int:
    """Partition `index`'s part of `capacity` split `parts` ways, as the engine splits it (the
    remainder spread over the first ones): hash partitions, partitions by a column, the shards
    of a cache group."""
    return _simcore.capacity_share(int(capacity), int(parts), int(index))


def factorize_text(values: np.ndarray) -> tuple[np.ndarray, list]:
    """pd.factorize(values, use_na_sentinel=True) of an object column: codes in order of first
    appearance and the distinct values. Compiled when every element is an exact str (equal
    objects found by address first: a column repeats a few shared objects); pandas otherwise."""
    got = _simcore.factorize_str(values)
    if got is None:
        import pandas as pd

        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        return codes, list(uniques)
    return got


def sum_by_key(key: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `values` (n, fields; uint64) summed by `key` (n,; int64): the index of each distinct
    key's first row, in ascending key order, and the sums (wrapping past 2⁶⁴ as numpy's adds)."""
    return _simcore.sum_by_key(np.ascontiguousarray(key, dtype=np.int64),
                               np.ascontiguousarray(values, dtype=np.uint64))


def exact_sum(values: np.ndarray) -> int:
    """Sum of u64 values as an exact int (a numpy u64 sum wraps past 2^64): high and low
    32-bit halves summed apart, each exact below 2^32 values."""
    v = np.asarray(values, dtype=np.uint64)
    return (int((v >> np.uint64(32)).sum(dtype=np.uint64)) << 32) + int((v & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))


def load_trace(path: str | Path, fmt: str = "csv") -> Trace:
    """The whole trace in memory, read by the engine (plain, zstd or gzip; `-` is stdin); Ctrl-C
    stops it even while it waits for its input (`in_engine_thread`)."""
    try:
        cols = in_engine_thread(lambda progress: _simcore.read_trace(str(path), fmt, progress))
    except ValueError as e:
        raise TraceError(str(e)) from None
    return Trace(**cols)


def simulate(
    trace: Trace,
    specs: Sequence[CacheSpec],
    chunk: int = 1 << 20,
    on_progress: Callable[[int], None] | None = None,
    seeds: Sequence[tuple[int, Sequence[tuple[int, int, int]]]] = (),
) -> np.ndarray:
    """Run every spec over the whole trace in one pass; returns totals (caches, tiers, fields).
    `seeds`: (cache index, files) warm starts of xcaches (`ShadowBank.seed`)."""
    n_tiers = max(1, len(trace.tier_names))
    bank = ShadowBank(specs, n_tiers)
    for cache, files in seeds:
        bank.seed(cache, files)
    next_access = _simcore.next_access_times(trace.file_id) if bank.needs_future else None
    clock = _clock(trace.timestamp) if bank.needs_clock else None
    ops = np.zeros(min(chunk, len(trace)), dtype=np.uint8)
    for start in range(0, len(trace), chunk):
        end = min(start + chunk, len(trace))
        bank.feed_totals(
            trace.file_id[start:end],
            trace.file_size[start:end],
            trace.bytes_read[start:end],
            trace.tier[start:end],
            ops[: end - start],
            None if next_access is None else next_access[start:end],
            None if clock is None else clock[start:end],
        )
        if on_progress:
            on_progress(end - start)
    return bank.totals()


def log_grid(low: int, high: int, points: int) -> list[int]:
    """`points` log-spaced capacities from low to high bytes (inclusive, deduplicated)."""
    if points < 1 or low < 1 or high < low:
        raise ValueError("grid needs 1 ≤ low ≤ high and at least one point")
    return sorted({int(round(x)) for x in np.geomspace(low, high, points)})


class LruCurve:
    """Exact (or SHARDS-sampled) LRU miss-ratio curve in one pass (the compiled `LruMrc`)."""

    def __init__(self, grid: Iterable[int], n_tiers: int = 64, sample_rate: float = 1.0, max_objects: int = 0,
                 *, _engine=None):
        self._mrc = _engine if _engine is not None else _simcore.LruMrc(
            [int(g) for g in grid], n_tiers, sample_rate, max_objects)

    def feed(self, file_id, file_size, bytes_read, tier, op, window=None) -> tuple[np.ndarray, np.ndarray]:
        """This batch's curve counters per window: hits (windows, K, tiers, 2), requested (windows, tiers, 2)."""
        return self._mrc.feed(_columns(file_id, file_size, bytes_read, tier, op), _col(window, np.uint32))

    @property
    def grid(self) -> list[int]:
        return self._mrc.grid

    @property
    def sample_rate(self) -> float:
        return self._mrc.sample_rate

    def curve(self) -> dict:
        """dict(grid (K,), hits (K, tiers, 2), requested (tiers, 2), sample_rate, tracked_files)."""
        return self._mrc.curve()

    def points(self, tier_names: Sequence[str] | None = None) -> list[dict]:
        """One dict per capacity: hit_ratio, byte_hit_ratio (estimates when sampled) and by_tier."""
        c = self.curve()
        req = c["requested"].sum(axis=0)
        out = []
        for j, cap in enumerate(c["grid"]):
            hits = c["hits"][j].sum(axis=0)
            point = {
                "capacity_bytes": int(cap),
                "requests": float(req[0]),
                "hits": float(hits[0]),
                "hit_ratio": float(hits[0] / req[0]) if req[0] else None,
                "bytes_requested": float(req[1]),
                "bytes_hit": float(hits[1]),
                "byte_hit_ratio": float(hits[1] / req[1]) if req[1] else None,
                "sample_rate": c["sample_rate"],
            }
            if tier_names:
                point["by_tier"] = {
                    name: {
                        "hit_ratio": float(c["hits"][j, t, 0] / c["requested"][t, 0]) if c["requested"][t, 0] else None,
                        "byte_hit_ratio": float(c["hits"][j, t, 1] / c["requested"][t, 1]) if c["requested"][t, 1] else None,
                    }
                    for t, name in enumerate(tier_names)
                    if c["requested"][t, 0]
                }
            out.append(point)
        return out

    def snapshot(self) -> bytes:
        return self._mrc.snapshot()

    @classmethod
    def restore(cls, data: bytes) -> "LruCurve":
        return cls((), _engine=_simcore.LruMrc.restore(data))
