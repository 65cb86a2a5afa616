"""Idempotency under replay: rollups and ReplacingMergeTree tables after double inserts."""

from __future__ import annotations

import numpy as np
import pytest

from cachescope.store import migrations as mig
from cachescope.store import tables

COUNTERS = ["requests", "hits", "bytes_requested", "bytes_hit", "bytes_filled", "evictions", "bytes_evicted"]


def _efficiency_rows(n_windows=130, window_s=60, seed=7):
    """Windows of one minute over two hours and a bit (3 hours, 2 days touched), 2 policies × 2 tiers."""
    rng = np.random.default_rng(seed)
    start0 = np.datetime64("2024-05-01T22:30:00", "s")
    rows = {k: [] for k in ["window_start", "window_end", "cache_group", "policy", "size_bytes", "tier",
                            "sample_rate", "partitions", *COUNTERS]}
    for w in range(n_windows):
        for policy in ("lru", "arc"):
            for tier in ("AOD", "HITS"):
                s = start0 + np.timedelta64(w * window_s, "s")
                rows["window_start"].append(s)
                rows["window_end"].append(s + np.timedelta64(window_s, "s"))
                rows["cache_group"].append("site")
                rows["policy"].append(policy)
                rows["size_bytes"].append(10 * 10**12)
                rows["tier"].append(tier)
                rows["sample_rate"].append(1.0)
                rows["partitions"].append(1)
                req = int(rng.integers(1, 1000))
                hits = int(rng.integers(0, req))
                rows["requests"].append(req)
                rows["hits"].append(hits)
                rows["bytes_requested"].append(req * 2**33)  # large: sums beyond 2^32
                rows["bytes_hit"].append(hits * 2**33)
                rows["bytes_filled"].append((req - hits) * 2**33)
                rows["evictions"].append(int(rng.integers(0, 50)))
                rows["bytes_evicted"].append(int(rng.integers(0, 2**40)))
    cols = {k: np.array(v) for k, v in rows.items()}
    cols["window_start"] = cols["window_start"].astype("datetime64[s]")
    cols["window_end"] = cols["window_end"].astype("datetime64[s]")
    for c in COUNTERS + ["size_bytes"]:
        cols[c] = cols[c].astype(np.uint64)
    cols["cache_group"] = cols["cache_group"].astype(object)
    cols["policy"] = cols["policy"].astype(object)
    cols["tier"] = cols["tier"].astype(object)
    return cols


def _expected(cols, period: str):
    """Totals per (period, policy, tier) computed in Python from the rows (each window once)."""
    out = {}
    for i in range(len(cols["requests"])):
        ws = cols["window_start"][i]
        p = ws.astype("datetime64[h]") if period == "hour" else ws.astype("datetime64[D]")
        key = (p.astype("datetime64[s]").item(), cols["policy"][i], cols["tier"][i])
        acc = out.setdefault(key, [0] * (len(COUNTERS) + 1))
        for j, c in enumerate(COUNTERS):
            acc[j] += int(cols[c][i])
        acc[-1] += 1  # windows
    return out


def _rollup(store, view, period):
    r = store.query(f"SELECT {period}, policy, tier, {', '.join(COUNTERS)}, windows, hit_ratio FROM {view} "
                    f"WHERE cache_group = {{g:String}} ORDER BY {period}, policy, tier", {"g": "site"})
    got = {}
    for row in r.rows:
        key = (row[0].replace(tzinfo=None), row[1], row[2])
        got[key] = list(row[3:3 + len(COUNTERS)]) + [row[3 + len(COUNTERS)]]
        assert row[-1] == pytest.approx(row[4] / row[3])
    return got


@pytest.mark.parametrize("period,view", [("hour", tables.EFFICIENCY_HOURLY_VIEW), ("day", tables.EFFICIENCY_DAILY_VIEW)])
def test_rollups_survive_double_insert(store, period, view):
    mig.migrate(store)
    cols = _efficiency_rows()
    expected = _expected(cols, period)
    assert len(expected) == (2 if period == "day" else 3) * 4  # 22:30 + 130 min: 2 days, 3 hours; × 2 policies × 2 tiers
    store.insert(tables.EFFICIENCY, cols)
    once = _rollup(store, view, period)
    assert once == expected
    # a replay after a failure: the same windows again, in other batches
    half = len(cols["requests"]) // 2
    store.insert(tables.EFFICIENCY, {k: v[half:] for k, v in cols.items()})
    store.insert(tables.EFFICIENCY, {k: v[:half] for k, v in cols.items()})
    assert _rollup(store, view, period) == expected
    # after merges too (states of the same window merged across parts)
    store.command(f"OPTIMIZE TABLE {tables.EFFICIENCY_HOURLY if period == 'hour' else tables.EFFICIENCY_DAILY} FINAL")
    store.command(f"OPTIMIZE TABLE {tables.EFFICIENCY} FINAL")
    assert _rollup(store, view, period) == expected
    assert store.query("SELECT count() FROM efficiency").scalar() == len(cols["requests"])
    # a plain sum over the (unmerged) source would have double-counted: the test can tell
    assert store.query("SELECT sum(requests) FROM efficiency").scalar() == sum(int(x) for x in cols["requests"])


def test_access_events_replay_collapses(store):
    mig.migrate(store)
    n = 1000
    # yesterday: inside the 90-day TTL (older rows may be dropped at any merge)
    day0 = np.datetime64("today", "D") - np.timedelta64(1, "D")
    ts = day0.astype("datetime64[us]") + (np.arange(n) // 10).astype("timedelta64[s]")  # 1 s resolution
    ev = {
        "ts": ts, "site": ["TOKYO-LCG2"] * n, "source": np.array(["dcache-billing"] * n, dtype=object),
        "server": ["pool1"] * n, "client": [""] * n, "vo": ["atlas"] * n,
        "path": np.array([f"/atlas/f{i % 97}" for i in range(n)], dtype=object),
        "file_id": np.arange(n, dtype=np.uint64) % 97 + np.uint64(2**63), "file_size": np.full(n, 2**32 + 1, dtype=np.uint64),
        "bytes_read": np.full(n, 2**32 + 1, dtype=np.uint64), "op": ["read"] * n, "tier": ["AOD"] * n,
        "cache_group": ["site"] * n, "seq": np.arange(n, dtype=np.uint64),
    }
    store.insert(tables.ACCESS_EVENTS, ev)
    store.insert(tables.ACCESS_EVENTS, {k: v[300:] for k, v in ev.items()})  # replay of the tail
    assert store.query("SELECT count() FROM access_events FINAL").scalar() == n
    # the what-if read: one group, a time range, in (ts, seq) order
    r = store.query("SELECT seq FROM access_events FINAL WHERE cache_group = {g:String} AND ts >= {a:DateTime64(6, 'UTC')} "
                    "AND ts < {b:DateTime64(6, 'UTC')} ORDER BY ts, seq",
                    {"g": "site", "a": day0 + np.timedelta64(10, "s"), "b": day0 + np.timedelta64(20, "s")})
    assert r.column("seq") == list(range(100, 200))
    assert store.query("SELECT countIf(observed_hit_bytes IS NULL) FROM access_events FINAL").scalar() == n
