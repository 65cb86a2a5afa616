"""The engine's sparse per-window counters (`ShadowBank.feed_cells`) are the dense ones (`feed`)
without the zero cells: same caches, same totals, whatever the window order or the tier codes
announced."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cachescope.simulation import FIELDS, CacheSpec, ShadowBank

SPECS = [CacheSpec(p, c) for p in ("lru", "arc", "s3fifo") for c in (40_000, 150_000)]
N_TIERS = 6


def batch(rng: np.random.Generator, n: int, windows: int, tiers: int):
    fid = rng.integers(0, 300, n).astype(np.uint64)
    size = (1_000 + fid * 37 % 9_000).astype(np.uint64)
    read = np.minimum(size, rng.integers(1, 10_000, n).astype(np.uint64))
    tier = (fid % tiers).astype(np.uint8)
    op = np.where(rng.random(n) < 0.02, 2, 0).astype(np.uint8)
    window = rng.integers(0, windows, n).astype(np.uint32)  # interleaved windows
    return fid, size, read, tier, op, window


def densify(cells: dict, n_windows: int) -> np.ndarray:
    out = np.zeros((n_windows, len(SPECS), N_TIERS, len(FIELDS)), dtype=np.uint64)
    np.add.at(out, (cells["window"].astype(np.int64), cells["cache"].astype(np.int64),
                    cells["tier"].astype(np.int64)), cells["values"])
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), windows=st.sampled_from([1, 3, 40, 20_000]), n=st.integers(1, 3_000))
def test_cells_are_the_dense_counters(seed, windows, n):
    rng = np.random.default_rng(seed)
    dense_bank, cell_bank = ShadowBank(SPECS, N_TIERS), ShadowBank(SPECS, N_TIERS)
    # later batches use fewer tier codes than files already cached carry: their evictions count
    for tiers in (N_TIERS, 2):
        fid, size, read, tier, op, window = batch(rng, n, windows, tiers)
        dense = dense_bank.feed(fid, size, read, tier, op, window=window)
        cells = cell_bank.feed_cells(fid, size, read, tier, op, window, tiers_used=tiers)
        assert (cells["values"].any(axis=1)).all()  # only touched cells come out
        key = (cells["window"].astype(np.int64) * 2**24 + cells["cache"].astype(np.int64) * 2**8 + cells["tier"])
        assert (np.diff(key) > 0).all()  # sorted by (window, cache, tier), each once
        assert np.array_equal(densify(cells, len(dense)), dense)
        assert np.array_equal(cell_bank.totals(), dense_bank.totals())


def test_caches_one_after_the_other_give_the_cells_and_totals_of_caches_on_all_cores():
    # 20,000 events × 6 caches: above the work the engine hands to its threads
    rng = np.random.default_rng(11)
    on_all_cores, in_this_thread = ShadowBank(SPECS, N_TIERS), ShadowBank(SPECS, N_TIERS)
    for windows in (1, 40, 20_000):
        cols = batch(rng, 20_000, windows, N_TIERS)
        a = on_all_cores.feed_cells(*cols, tiers_used=N_TIERS)
        b = in_this_thread.feed_cells(*cols, tiers_used=N_TIERS, parallel=False)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        assert np.array_equal(on_all_cores.totals(), in_this_thread.totals())
