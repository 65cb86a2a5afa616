"""cachescope.core.shadow.ShadowWindows: the shadow caches' open efficiency windows, closing them,
their rows, totals and the alert counters."""

from __future__ import annotations

import numpy as np

from cachescope.config.pipeline import PipelineConfig
from cachescope.core.cells import Cells
from cachescope.core.routing import ShadowRouting
from cachescope.core.shadow import ShadowWindows
from cachescope.simulation import FIELDS
from support.synthetic import event_stream

MINUTE = 60_000_000
CONFIG = PipelineConfig.model_validate({"shadow": {"policies": ["lru", "fifo"], "sizes": ["50GB", "500GB"]},
                                        "curve": {"enabled": False}})


def _shadow() -> ShadowWindows:
    return ShadowWindows(CONFIG, ShadowRouting(CONFIG, 0), MINUTE, parallel=False)


def _events(n: int = 4_000):
    ev = event_stream(n, jitter_us=0, deletes=0.05)
    return ev, ev.ts - ev.ts % MINUTE


def _table(cells: list[Cells]) -> dict[tuple[int, int, int], list[int]]:
    return {(int(s), int(c), int(t)): v.tolist() for p in cells for s, c, t, v in zip(p.start, p.cache, p.tier, p.values)}


def test_cells_do_not_depend_on_how_the_stream_was_cut():
    ev, win = _events()
    whole = _shadow()
    whole.feed(ev, win)
    cut = _shadow()
    for a in range(0, len(ev), 333):
        cut.feed(ev.take(np.arange(a, min(a + 333, len(ev)))), win[a:a + 333])
    assert cut.open_starts == whole.open_starts == set(win.tolist())
    assert _table(cut.open) == _table(whole.open) and len(_table(whole.open)) > 10
    starts = [int(p.start[-1]) for p in cut.open]  # window-disjoint pieces in window order
    assert all(a < int(b.start[0]) for a, b in zip(starts, cut.open[1:]))


def test_closing_hands_over_only_the_closed_windows_once():
    ev, win = _events()
    s = _shadow()
    s.feed(ev, win)
    everything = _table(s.open)
    bound = int(win[len(win) // 2])
    done, eff = s.close(bound)
    assert done == sorted(w for w in set(win.tolist()) if w + MINUTE <= bound)
    got = _table(eff)
    assert got and all(k[0] + MINUTE <= bound for k in got)
    assert s.close(bound) == ([], [])
    rest_done, rest = s.close(None)
    assert got | _table(rest) == everything and not set(done) & set(rest_done)
    assert s.open == [] and s.open_starts == set()


def test_rows_keep_cells_with_requests_or_evictions_and_add_up_the_totals():
    ev, win = _events()
    s = _shadow()
    s.feed(ev, win)
    done, eff = s.close(None)
    rows = s.rows(eff, MINUTE, "site-A", 0, 7, totals=True)
    req, ev_ = FIELDS.index("requests"), FIELDS.index("evictions")
    want = {k: v for k, v in _table(eff).items() if v[req] > 0 or v[ev_] > 0}
    got = {(int(a), int(b), int(c)): d.tolist() for p in zip(rows.starts, rows.caches, rows.tiers, rows.values)
           for a, b, c, d in zip(*p)}
    assert got == want and rows.run == 7 and rows.cache_group == "site-A"
    totals = np.zeros((len(s.specs), len(FIELDS)), dtype=np.uint64)
    for (_, c, _), v in want.items():
        totals[c] += np.array(v, dtype=np.uint64)
    assert (s.emitted_totals == totals).all() and s.emitted_any.all()
    assert s.rows(eff, MINUTE, "site-A", 0, 7).run == 7 and (s.emitted_totals == totals).all()  # no totals twice


def test_alert_counters_are_the_first_four_fields_per_window_and_cache():
    ev, win = _events()
    s = _shadow()
    s.feed(ev, win)
    done, eff = s.close(None)
    got = s.alert_counters(done, eff)
    assert got.shape == (len(done), len(s.specs), 4)
    want = np.zeros(got.shape, dtype=np.int64)
    for (w, c, _), v in _table(eff).items():
        want[done.index(w), c] += np.array(v[:4], dtype=np.int64)
    assert FIELDS[:4] == ("requests", "hits", "bytes_requested", "bytes_hit")
    assert (got == want).all() and want.any()
