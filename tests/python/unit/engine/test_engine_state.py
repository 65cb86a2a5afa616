"""Property: a bank restored from a snapshot and fed the rest of a stream ends exactly where an
uninterrupted bank ends (counters, occupancy, and every later decision)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cachescope import _simcore
from cachescope.simulation import POLICIES, CacheSpec, ShadowBank



def _columns(raw_ids, size_of, ops, frac):
    ids = np.array([i * 0x9E3779B97F4A7C15 % 2**64 for i in raw_ids], dtype=np.uint64)
    sizes = np.array([size_of[i] for i in raw_ids], dtype=np.uint64)
    read = np.maximum(1, (sizes * np.array(frac)).astype(np.uint64))
    return ids, sizes, read, (np.asarray(raw_ids) % 3).astype(np.uint8), np.array(ops, dtype=np.uint8)


@st.composite
def stream_and_cut(draw):
    n = draw(st.integers(1, 300))
    files = draw(st.integers(1, 50))
    raw = draw(st.lists(st.integers(0, files), min_size=n, max_size=n))
    size_of = {i: draw(st.integers(1, 6_000_000_000)) for i in sorted(set(raw))}
    ops = draw(st.lists(st.sampled_from([0, 0, 0, 0, 0, 0, 1, 2]), min_size=n, max_size=n))
    frac = draw(st.lists(st.sampled_from([1.0, 1.0, 0.5, 0.01]), min_size=n, max_size=n))
    return _columns(raw, size_of, ops, frac), draw(st.integers(0, n))


SPECS = [CacheSpec(p, c) for p in POLICIES for c in (3_000_000_000, 20_000_000_000)] + [
    CacheSpec("lru", 20_000_000_000, sample_rate=0.5, partitions=3)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_and_cut())
def test_restore_continues_identically(case):
    (ids, sizes, read, tier, ops), cut = case
    nxt = _simcore.next_access_times(ids)
    whole = ShadowBank(SPECS, 3)
    whole.feed(ids, sizes, read, tier, ops, nxt)
    first = ShadowBank(SPECS, 3)
    first.feed(ids[:cut], sizes[:cut], read[:cut], tier[:cut], ops[:cut], nxt[:cut])
    resumed = ShadowBank.restore(first.snapshot())
    resumed.feed(ids[cut:], sizes[cut:], read[cut:], tier[cut:], ops[cut:], nxt[cut:])
    np.testing.assert_array_equal(whole.totals(), resumed.totals())
    assert whole.occupancy() == resumed.occupancy()
    # later decisions too: replay the whole stream once more on both
    a = whole.feed(ids, sizes, read, tier, ops, nxt + len(ids))
    b = resumed.feed(ids, sizes, read, tier, ops, nxt + len(ids))
    np.testing.assert_array_equal(a, b)


def test_corrupt_or_foreign_snapshots_are_refused():
    import pytest

    bank = ShadowBank([CacheSpec("lru", 100)], 1)
    snap = bank.snapshot()
    with pytest.raises(ValueError, match="not a cachescope bank snapshot"):
        ShadowBank.restore(b"hello world, not a bank")
    with pytest.raises(ValueError, match="version"):
        ShadowBank.restore(snap[:8] + (999).to_bytes(4, "little") + snap[12:])
    with pytest.raises(ValueError, match="corrupt"):
        ShadowBank.restore(snap[:14])
