"""The processing core: results depend on the event sequence only, never on batching or restarts."""

import numpy as np
import pandas as pd
import pytest

from cachescope.core import EventColumns, GroupProcessor, PipelineConfig
from cachescope.simulation import CacheSpec, ShadowBank
from support.synthetic import event_stream


def frame(rows) -> pd.DataFrame:
    """Emitted rows as a DataFrame, labels as plain strings (EfficiencyRows give Categoricals)."""
    df = pd.DataFrame(rows if isinstance(rows, dict) else rows.columns())
    return df.astype({c: object for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)})

CONFIG = PipelineConfig.model_validate({
    "shadow": {"policies": ["lru", "fifo"], "sizes": ["200GB", "1TB", "3TB"]},
    "windows": {"efficiency": "5m", "curve": "1h", "max_out_of_orderness": "30s", "allowed_lateness": "1m"},
    "curve": {"points": 8, "min": "100GB", "max": "10TB"},
})


def run(ev: EventColumns, cuts: list[int], restart_at: int | None = None,
        config: PipelineConfig = CONFIG) -> dict[str, pd.DataFrame]:
    p = GroupProcessor("site-A", config)
    outs = []
    bounds = [0, *cuts, len(ev)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if restart_at is not None and i == restart_at:
            p = GroupProcessor.restore("site-A", config, p.snapshot())
        outs.append(p.process(ev.take(np.arange(a, b))))
    outs.append(p.flush())
    tables = {}
    for name in ("efficiency", "mrc", "observed"):
        parts = [frame(getattr(o, name)) for o in outs if getattr(o, name) is not None]
        df = pd.concat(parts, ignore_index=True)
        tables[name] = df.sort_values(list(df.columns[:6])).reset_index(drop=True)
    tables["late"] = sum(len(o.late) for o in outs if o.late is not None)
    return tables


def test_batching_and_restarts_do_not_change_results():
    ev = event_stream(jitter_us=200_000_000)  # disorder beyond the lateness: some events are late
    whole = run(ev, [])
    assert whole["late"] > 0
    for cuts, restart in [([1, 777, 5000, 13_001], None), (list(range(1000, 20_000, 1000)), 7)]:
        other = run(ev, cuts, restart)
        for name in ("efficiency", "mrc", "observed"):
            pd.testing.assert_frame_equal(whole[name], other[name])
        assert other["late"] == whole["late"]


def test_delayed_hits_do_not_depend_on_batching_or_restarts():
    # an xcache whose fetches take time (100 MB/s): the fetches in flight are part of the state, so a
    # restore mid-stream writes the same delayed hits (and every other column) as one pass
    timed = CONFIG.model_copy(update={"shadow": CONFIG.shadow.model_copy(update={
        "policies": ["xcache", "lru"], "params": {"xcache": {"origin_rate": 1e8}}})})
    ev = event_stream(jitter_us=0)
    whole = run(ev, [], config=timed)
    eff = whole["efficiency"]
    xc = eff[eff["policy"] == "xcache"]
    assert xc["delayed_hits"].sum() > 0 and xc["bytes_delayed"].sum() > 0
    assert (eff.loc[eff["policy"] == "lru", ["delayed_hits", "bytes_delayed"]] == 0).all().all()
    for cuts, restart in [([1, 777, 5000, 13_001], 2), (list(range(1000, 20_000, 1000)), 7)]:
        other = run(ev, cuts, restart, config=timed)
        pd.testing.assert_frame_equal(whole["efficiency"], other["efficiency"])


def test_windows_add_up_to_one_pass_of_the_bank():
    ev = event_stream(jitter_us=0)  # in order: nothing late
    eff = run(ev, [3000])["efficiency"]
    bank = ShadowBank([CacheSpec(p, c) for p in ("lru", "fifo") for c in (200 * 10**9, 10**12, 3 * 10**12)], 8)
    tiers = {n: i for i, n in enumerate(sorted(set(ev.tier)))}
    bank.feed(ev.file_id, ev.file_size, ev.bytes_read, np.array([tiers[t] for t in ev.tier], dtype=np.uint8), ev.op)
    totals = bank.totals().sum(axis=1)  # (caches, fields)
    per_cache = eff.groupby(["policy", "size_bytes"], sort=False)[["requests", "hits", "bytes_hit"]].sum()
    for i, (policy, size) in enumerate((p, c) for p in ("lru", "fifo") for c in (200 * 10**9, 10**12, 3 * 10**12)):
        got = per_cache.loc[(policy, size)]
        assert (int(got["requests"]), int(got["hits"]), int(got["bytes_hit"])) == (totals[i][0], totals[i][1], totals[i][3])


def test_late_events_are_reported_not_counted():
    ev = event_stream(n=2000, jitter_us=0)
    old = ev.take(np.arange(10))
    old.ts = old.ts - 3_600_000_000  # an hour behind the stream: its windows closed long ago
    p = GroupProcessor("g", CONFIG)
    p.process(ev)
    out = p.process(old)
    assert out.late is not None and len(out.late) == 10
    assert out.efficiency is None
    assert out.health["late_events"] == 10


def test_observed_bytes_of_the_real_cache_are_aggregated():
    ev = event_stream(n=3000, jitter_us=0)
    obs = run(ev, [])["observed"]
    reads = (ev.op == 0) & (ev.observed_hit_bytes >= 0)
    assert obs["accesses"].sum() == reads.sum()
    assert obs["hit_bytes"].sum() == ev.observed_hit_bytes[reads].sum()
    assert obs["miss_bytes"].sum() == ev.observed_miss_bytes[reads].sum()


def test_state_from_another_configuration_is_refused():
    p = GroupProcessor("g", CONFIG)
    p.process(event_stream(n=100))
    other = CONFIG.model_copy(update={"shadow": CONFIG.shadow.model_copy(update={"sizes": ["5TB"]})})
    with pytest.raises(ValueError, match="other shadow caches"):
        GroupProcessor.restore("g", other, p.snapshot())


def test_shards_of_a_group_are_exactly_one_partitioned_cache():
    """A group spread over 3 shards (sub-streams by file hash, caches of size/3 each) adds up to
    the bank's own hash-partitioned cache of 3 partitions: same counters, window by window."""
    from cachescope.core.shards import split

    ev = event_stream(n=6000, jitter_us=0)
    sharded = CONFIG.model_copy(update={"shards": 3})
    partitioned = CONFIG.model_copy(update={"shadow": CONFIG.shadow.model_copy(update={"partitions": 3})})
    parts = []
    for k, sub in split(ev, 3):
        p = GroupProcessor("site-A", sharded, shard=k)
        parts += [p.process(sub), p.flush()]
    whole = GroupProcessor("site-A", partitioned)
    ref = [whole.process(ev), whole.flush()]
    key = ["window_start", "policy", "size_bytes", "tier"]

    def total(outs, table, key, fields):
        df = pd.concat([frame(getattr(o, table)) for o in outs if getattr(o, table) is not None])
        return df.groupby(key)[fields].sum().sort_index()

    fields = ["requests", "hits", "bytes_requested", "bytes_hit", "bytes_filled", "evictions"]
    got = total(parts, "efficiency", key, fields)
    assert got.groupby(level=["policy", "size_bytes"])["requests"].sum().eq((ev.op == 0).sum()).all()
    pd.testing.assert_frame_equal(got, total(ref, "efficiency", key, fields))
    assert {int(s) for o in parts if o.efficiency is not None for s in o.efficiency.columns()["shard"]} == {0, 1, 2}
    # the curve: every shard labels its rows with the full grid sizes
    curve = total(parts, "mrc", ["window_start", "tier", "capacity_bytes"], ["requests", "hits"])
    assert set(curve.index.get_level_values("capacity_bytes")) == set(CONFIG.curve.grid())


def test_state_of_another_shard_is_refused():
    sharded = CONFIG.model_copy(update={"shards": 2})
    p = GroupProcessor("g", sharded, shard=1)
    with pytest.raises(ValueError, match="other shadow caches"):
        GroupProcessor.restore("g", sharded, p.snapshot(), shard=0)


def test_tier_codes_by_factorize_equal_np_unique(monkeypatch):
    """TierCodes.encode numbers new names in np.unique's order whether the names come from the
    compiled factorize or from np.unique over `astype(str)` (its old and fallback path)."""
    import random

    from cachescope.core import tier_codes as tc

    assert tc._factorize_str is not None, "cachescope._simcore lacks factorize_str: rebuild the engine"
    rng = random.Random(1)
    names = ["AOD", "DAOD_PHYS", "", "HITS", "é", "Z", "a", "MINIAODSIM", "USER", "x\x00", "ÿ", "\U0001F600"]
    compiled = tc._factorize_str
    for _ in range(300):
        n_tiers = rng.randint(2, 8)
        a, b = tc.TierCodes(n_tiers), tc.TierCodes(n_tiers)
        for _ in range(3):
            batch = np.array([rng.choice(names) for _ in range(rng.randint(0, 40))], dtype=object)
            got = a.encode(batch)
            monkeypatch.setattr(tc, "_factorize_str", None)
            want = b.encode(batch)
            monkeypatch.setattr(tc, "_factorize_str", compiled)
            assert np.array_equal(got, want) and got.dtype == want.dtype and a.names == b.names


def test_cells_summed_in_compiled_code_equal_a_sort_by_their_three_columns():
    from cachescope.core.cells import Cells as _Cells

    rng = np.random.default_rng(7)
    n, minute = 50_000, 60_000_000
    start = (1_700_000_000 // 60 + rng.integers(0, 90, n)) * minute
    cache, tier = rng.integers(0, 24, n), rng.integers(0, 9, n)
    values = rng.integers(0, 2**64, (n, 10), dtype=np.uint64, endpoint=False)  # sums wrap past 2^64
    got = _Cells(start, cache, tier, values).summed(minute)
    order = np.lexsort((tier, cache, start))
    s, c, t = start[order], cache[order], tier[order]
    first = np.ones(n, dtype=bool)
    first[1:] = (s[1:] != s[:-1]) | (c[1:] != c[:-1]) | (t[1:] != t[:-1])
    assert (got.start == s[first]).all() and (got.cache == c[first]).all() and (got.tier == t[first]).all()
    assert (got.values == np.add.reduceat(values[order], np.flatnonzero(first), axis=0)).all()
    assert 0 < got.n < n


def test_text_codes_in_sorted_order_equal_pandas_factorize():
    """The real cache's rows are grouped by server and tier in string order: the compiled
    factorisation (by object, then by text) ranked by Python's sort gives pandas' sorted codes,
    for equal strings that are distinct objects, non-ASCII and empty names too."""
    from cachescope.core.cells import _sorted_codes

    rng = np.random.default_rng(11)
    names = ["srv-10", "srv-9", "", "Zed", "äx", "srv-1", "x" * 300]
    pool = np.array([n + "" if i % 2 else "".join(list(n)) for i, n in enumerate(names * 3)], dtype=object)
    for n in (1, 7, 5_000):
        values = pool[rng.integers(0, len(pool), n)]
        codes, uniques = _sorted_codes(values)
        want_codes, want_uniques = pd.factorize(values, sort=True)
        assert np.array_equal(codes, want_codes) and list(uniques) == list(want_uniques)
    mixed = np.array(["b", None, "a"], dtype=object)  # not all text: pandas decides
    assert np.array_equal(_sorted_codes(mixed)[0], pd.factorize(mixed, sort=True)[0])


@pytest.mark.parametrize("spread", ["minutes", "centuries"])
def test_real_cache_rows_summed_in_compiled_code_equal_a_pandas_group_by(spread):
    """One row per (window, server, tier), in that order (names as sorted() orders them), int64
    sums wrapping as numpy's; windows too far apart for one integer key take the sort path."""
    from cachescope.core.cells import Cells as _Observed

    rng = np.random.default_rng(3)
    n, minute = 20_000, 60_000_000
    if spread == "minutes":
        start, length = (1_700_000_000 // 60 + rng.integers(0, 90, n)) * minute, minute
    else:  # 1-µs windows 2^62 apart
        start, length = rng.choice(np.array([0, 5, 2**62], dtype=np.int64), n), 1
    servers = np.array(["xcache02", "xcache10", "Xc", "ä", ""], dtype=object)[rng.integers(0, 5, n)]
    tiers = np.array(["AOD", "NANOAOD", "USER"], dtype=object)[rng.integers(0, 3, n)]
    values = rng.integers(-2**62, 2**62, (n, 6), dtype=np.int64) * 2  # sums wrap past 2^63
    got = _Observed(start, servers, tiers, values).summed(length)
    frame = pd.DataFrame({"w": start, "s": servers, "t": tiers})
    groups = frame.groupby(["w", "s", "t"], sort=True).indices
    keys = sorted(groups)
    assert list(zip(got.start.tolist(), got.server.tolist(), got.tier.tolist())) == keys
    with np.errstate(over="ignore"):
        want = np.array([values[groups[k]].sum(axis=0) for k in keys])
    assert (got.values == want).all() and got.values.dtype == np.int64


def test_open_window_pieces_add_up_to_all_cells_summed_at_once():
    """Batches of cells reaching back into the open windows: the pieces stay window-disjoint and
    in window order, and together they are every cell summed once, also after closing a prefix."""
    from cachescope.core.cells import Cells as _Cells

    rng = np.random.default_rng(5)
    minute = 60_000_000
    batches, pieces, low = [], [], 0
    for _ in range(30):
        n = int(rng.integers(0, 400))
        start = np.sort(low + rng.integers(-3, 12, n)).clip(0) * minute  # the last few open minutes too
        cells = _Cells(start, rng.integers(0, 4, n), rng.integers(0, 3, n),
                       rng.integers(0, 2**64, (n, 3), dtype=np.uint64, endpoint=False)).summed(minute)
        batches.append(cells)
        pieces = _Cells.add_to_pieces(pieces, cells, minute)
        low += int(rng.integers(0, 8))
        ends = [int(p.start[-1]) for p in pieces]
        assert all(p.n for p in pieces) and all(a < int(b.start[0]) for a, b in zip(ends, pieces[1:]))
    whole = _Cells.concat(batches).summed(minute)
    closed, still_open = _Cells.split_pieces(pieces, int(whole.start[whole.n // 2]), minute)
    got = _Cells.concat([_Cells.empty(3), *closed, *still_open])
    assert closed and still_open
    assert (got.start == whole.start).all() and (got.cache == whole.cache).all() and (got.tier == whole.tier).all()
    assert (got.values == whole.values).all()


def test_window_positions_by_run_equal_searchsorted():
    from cachescope.core.cells import positions as _positions

    rng = np.random.default_rng(9)
    for n in (0, 1, 7, 20_000):
        done = np.unique(rng.integers(0, 300, 50)) * 60
        starts = np.sort(np.r_[rng.choice(done, n), rng.integers(-5, 400, n // 10) * 60])  # some not in done
        assert np.array_equal(_positions(done, starts), np.searchsorted(done, starts))
