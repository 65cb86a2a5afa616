"""Residence ages from the engine against a plain Python LRU that stamps each file's arrival:
per window, the ages of the files evicted and the mean age of the resident files at each read."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from cachescope.simulation import F, CacheSpec, ShadowBank


def _model(ids, sizes, ops, ts_s, window, capacity, n_windows):
    """LRU by bytes (libCacheSim's rules) with arrival times; counters per window."""
    lru: OrderedDict[int, tuple[int, int]] = OrderedDict()  # id -> (size, arrival)
    used, clock = 0, 0
    out = np.zeros((n_windows, 3), dtype=np.int64)  # evicted_age_s, resident_age_s, age_reads
    for i, s, op, t, w in zip(ids, sizes, ops, ts_s, window):
        if op != 0:
            if i in lru:
                used -= lru.pop(i)[0]
            continue
        clock = max(clock, t)
        if lru:
            out[w, 1] += (clock * len(lru) - sum(a for _, a in lru.values())) // len(lru)
        out[w, 2] += 1
        if i in lru:
            lru.move_to_end(i)
            continue
        if s > capacity:
            continue
        while used + s > capacity:
            _, (vs, va) = lru.popitem(last=False)
            used -= vs
            out[w, 0] += clock - va
        lru[i] = (s, clock)
        used += s
    return out


def test_engine_ages_match_a_python_lru_with_arrival_times():
    rng = np.random.default_rng(7)
    n = 6000
    ids = rng.zipf(1.3, n).astype(np.uint64) % 400
    sizes = (ids * 37 % 91 + 5).astype(np.uint64)
    ops = np.where(rng.random(n) < 0.02, 2, 0).astype(np.uint8)
    ts_us = 1_700_000_000_000_000 + np.cumsum(rng.integers(0, 3_000_000, n))
    ts_us[::50] -= 20_000_000  # some events out of order: the cache's clock never goes back
    window = ((ts_us - ts_us[0]) // 600_000_000).clip(0).astype(np.uint32)
    n_windows = int(window.max()) + 1
    capacity = 2000
    bank = ShadowBank([CacheSpec("lru", capacity)], 1)
    got = bank.feed(ids, sizes, sizes, np.zeros(n, np.uint8), ops, window=window, ts=ts_us)[:, 0, 0, :]
    want = _model(ids.tolist(), sizes.tolist(), ops.tolist(), (ts_us // 1_000_000).tolist(), window.tolist(),
                  capacity, n_windows)
    assert got[:, F["evictions"]].sum() > 100
    assert (got[:, [F["evicted_age_s"], F["resident_age_s"], F["age_reads"]]] == want).all()


def test_without_timestamps_no_age_and_the_same_hits():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 300, 3000).astype(np.uint64)
    sizes = (ids % 50 + 1).astype(np.uint64)
    z = np.zeros(len(ids), np.uint8)
    specs = [CacheSpec(p, 1500) for p in ("lru", "arc", "s3fifo", "xcache")]
    timed = ShadowBank(specs, 1).feed(ids, sizes, sizes, z, z, ts=np.arange(len(ids)) * 1_000_000)
    plain = ShadowBank(specs, 1).feed(ids, sizes, sizes, z, z)
    ages = [F["evicted_age_s"], F["resident_age_s"], F["age_reads"]]
    assert (plain[..., ages] == 0).all() and (timed[..., F["age_reads"]] > 0).all()
    rest = [i for i in range(plain.shape[-1]) if i not in ages]
    # timing changes no simulation result, except xcache's: its purges run on event time
    assert (plain[..., :3, :, rest] == timed[..., :3, :, rest]).all()
    assert (plain[..., 3, :, rest] != timed[..., 3, :, rest]).any()
