"""cachescope.core.curves.Curves: the LRU curve's counters per curve window, emitted as `mrc` rows."""

from __future__ import annotations

import numpy as np

from cachescope.config.pipeline import PipelineConfig
from cachescope.core.curves import Curves
from cachescope.core.routing import ShadowRouting
from cachescope.simulation import LruCurve
from support.synthetic import event_stream

MINUTE, HOUR = 60_000_000, 3_600_000_000


def _config(shards: int = 1) -> PipelineConfig:
    return PipelineConfig.model_validate({"shards": shards, "shadow": {"policies": ["lru"], "sizes": ["50GB"]},
                                          "windows": {"curve": "10m"}, "curve": {"points": 5, "min": "10GB", "max": "1TB"}})


def _feed(curves: Curves, ev, batch: int) -> None:
    win = ev.ts - ev.ts % MINUTE
    tier = np.unique(ev.tier, return_inverse=True)[1].astype(np.uint8)
    for a in range(0, len(ev), batch):
        curves.feed(ev.take(np.arange(a, min(a + batch, len(ev)))), win[a:a + batch], tier[a:a + batch])


def test_rows_of_all_windows_add_up_to_the_one_pass_curve_whatever_the_batches():
    ev = event_stream(4_000, jitter_us=0)
    names = sorted(set(ev.tier.tolist()))
    got = []
    for batch in (4_000, 317):
        c = Curves(_config(), ShadowRouting(_config(), 0))
        _feed(c, ev, batch)
        rows = c.close(None, "site-A", 0, 3, names)
        got.append(rows)
        assert c.open == {} and c.close(None, "site-A", 0, 3, names) is None
    for column in got[0]:
        assert list(got[0][column]) == list(got[1][column]), column
    rows = got[0]
    whole = LruCurve(_config().curve.grid(), _config().n_tiers)
    tier = np.unique(ev.tier, return_inverse=True)[1].astype(np.uint8)
    whole.feed(ev.file_id, ev.file_size, ev.bytes_read, tier, ev.op)
    want = whole.curve()
    for k, cap in enumerate(_config().curve.grid()):
        m = rows["capacity_bytes"] == cap
        assert rows["hits"][m].sum() == want["hits"][k, :, 0].sum()
        assert rows["bytes_hit"][m].sum() == want["hits"][k, :, 1].sum()
        assert rows["requests"][m].sum() == want["requested"][:, 0].sum()
    starts = set(rows["window_start"].astype(np.int64).tolist())
    assert all(s % (10 * MINUTE) == 0 for s in starts) and len(starts) > 3
    assert set(rows["tier"]) == set(names) and (rows["run"] == 3).all() and set(rows["cache_group"]) == {"site-A"}


def test_a_window_closes_at_its_end_and_rows_carry_the_configured_capacities():
    ev = event_stream(3_000, jitter_us=0)
    names = sorted(set(ev.tier.tolist()))
    c = Curves(_config(shards=2), ShadowRouting(_config(shards=2), 1))
    assert c.curve.grid == [g // 2 for g in _config().curve.grid()]  # the shard's part of each capacity
    _feed(c, ev, 500)
    first = min(c.open)
    assert c.close(first + 10 * MINUTE - 1, "g", 1, 1, names) is None
    rows = c.close(first + 10 * MINUTE, "g", 1, 1, names)
    assert set(rows["window_start"].astype(np.int64).tolist()) == {first} and first not in c.open
    assert set(rows["capacity_bytes"].tolist()) == set(_config().curve.grid()) and (rows["shard"] == 1).all()
