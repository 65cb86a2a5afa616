"""cachescope.core.observed.RealCache: the real cache's own numbers per (window, server, tier)."""

from __future__ import annotations

import numpy as np

from cachescope.core.columns import NO_OBSERVATION
from cachescope.core.observed import OBSERVED_FIELDS, RealCache
from support.synthetic import event_stream

MINUTE = 60_000_000


def _events(n: int = 3_000):
    ev = event_stream(n, jitter_us=0, deletes=0.05)
    rng = np.random.default_rng(4)
    has = ev.observed_hit_bytes != NO_OBSERVATION
    # some records carry the cache's own verdict, some bypass bytes
    ev.observed_hit = np.where(has & (rng.random(n) < 0.3), rng.integers(0, 2, n), NO_OBSERVATION).astype(np.int8)
    ev.observed_bypass_bytes = np.where(has & (rng.random(n) < 0.1), 5, ev.observed_bypass_bytes).astype(np.int64)
    ev.observed_miss_bytes = np.where(has & (rng.random(n) < 0.4), 0, ev.observed_miss_bytes).astype(np.int64)
    # some carry the bytes fetched from the origin (XRootD >= 5.7.2), prefetch making them exceed the bytes read
    ev.observed_origin_bytes = np.where(has & (rng.random(n) < 0.5), rng.integers(0, 3 * 10**6, n),
                                        NO_OBSERVATION).astype(np.int64)
    return ev, ev.ts - ev.ts % MINUTE


def _reference(ev, win) -> dict[tuple[int, str, str], list[int]]:
    out: dict = {}
    for i in range(len(ev)):
        hb, mb, bb, v, o = (int(x[i]) for x in (ev.observed_hit_bytes, ev.observed_miss_bytes,
                                                 ev.observed_bypass_bytes, ev.observed_hit, ev.observed_origin_bytes))
        if ev.op[i] != 0 or (hb == mb == v == o == NO_OBSERVATION):
            continue
        hb, mb, bb = max(hb, 0), max(mb, 0), max(bb, 0)
        hit = v == 1 if v != NO_OBSERVATION else (hb > 0 and mb == 0 and bb == 0)
        n = int(ev.bytes_read[i])
        known = o != NO_OBSERVATION
        # the bytes served from the cache: a hit all, a miss what did not come from the origin
        cache = n if hit else n - min(n, max(o, 0))
        k = (int(win[i]), ev.server[i], ev.tier[i])
        add = [1, n, hb, mb, bb, int(hit), int(known), n if known else 0, o if known else 0, cache if known else 0,
               hb if known else 0, n if hit and not known else 0, int(not known and v != NO_OBSERVATION)]
        out[k] = [a + b for a, b in zip(out.get(k, [0] * len(OBSERVED_FIELDS)), add)]
    return out


def _table(cells) -> dict:
    return {(s, w, t): v for s, w, t, v in zip(cells.start.tolist(), cells.server.tolist(), cells.tier.tolist(),
                                               cells.values.tolist())}


def test_reads_with_observations_summed_per_window_server_and_tier():
    ev, win = _events()
    r = RealCache(MINUTE)
    for a in range(0, len(ev), 250):
        r.observe(ev.take(np.arange(a, min(a + 250, len(ev)))), win[a:a + 250])
    want = _reference(ev, win)
    assert _table(r.open) == want and sorted(want) == list(_table(r.open))  # in (window, server, tier) order
    assert any(v[5] for v in want.values()) and any(v[3] for v in want.values())
    assert any(v[6] for v in want.values()) and any(v[12] for v in want.values())


def test_closing_and_rows():
    ev, win = _events()
    r = RealCache(MINUTE)
    r.observe(ev, win)
    want = _reference(ev, win)
    bound = int(win[len(win) // 2])
    closed = r.close(bound)
    assert _table(closed) == {k: v for k, v in want.items() if k[0] + MINUTE <= bound}
    starts, sums = r.alert_sums(closed)
    assert starts == sorted({k[0] for k in _table(closed)})
    for s, row in zip(starts, sums.tolist()):
        assert row == [sum(v[i] for k, v in _table(closed).items() if k[0] == s) for i in (2, 3, 4, 0, 5, 1, 6, 9, 12)]
    rows = r.rows(closed, "site-A", 1, 9)
    assert list(rows) == ["window_start", "cache_group", "server", "tier", *OBSERVED_FIELDS, "shard", "run"]
    assert rows["window_start"][0] == np.datetime64(int(closed.start[0]), "us") and set(rows["cache_group"]) == {"site-A"}
    assert (rows["shard"] == 1).all() and (rows["run"] == 9).all() and rows["hits"].dtype == np.uint64
    rest = r.close(None)
    assert _table(closed) | _table(rest) == want and r.close(None) is None


def test_a_batch_without_observations_leaves_nothing_open():
    ev = event_stream(500, observed=False)
    r = RealCache(MINUTE)
    r.observe(ev, ev.ts - ev.ts % MINUTE)
    assert r.open.n == 0 and r.close(None) is None
