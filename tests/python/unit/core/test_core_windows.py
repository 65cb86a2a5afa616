"""cachescope.core.windows.EventTime: the watermark each event meets, late events and closing."""

from __future__ import annotations

import numpy as np

from cachescope.core.windows import NEG_INF, EventTime, closed

S = 1_000_000
MINUTE = 60 * S


def _naive(ts: list[int], window: int, ooo: int, lateness: int) -> tuple[list[int], list[bool], list[int]]:
    """Event by event: the watermark from everything before it."""
    max_ts, wins, late, met = NEG_INF, [], [], []
    for t in ts:
        w = t - t % window
        is_late = w + window + lateness <= max_ts - ooo
        wins.append(w)
        late.append(is_late)
        if is_late:
            met.append(max_ts - ooo)
        max_ts = max(max_ts, t)
    return wins, late, met


def test_late_events_and_the_watermark_they_met_do_not_depend_on_the_batches():
    rng = np.random.default_rng(1)
    ts = (1_700_000_000 * S + np.arange(5_000) * S + rng.integers(-200 * S, 200 * S, 5_000)).astype(np.int64)
    want = _naive(ts.tolist(), MINUTE, MINUTE, 30 * S)
    assert any(want[1]) and not all(want[1])
    for cuts in ([5_000], [1, 7, 1_000, 5_000], list(range(250, 5_001, 250))):
        t, lo, got = EventTime(MINUTE, MINUTE, 30 * S), 0, ([], [], [])
        for hi in cuts:
            win, late, met = t.assign(ts[lo:hi])
            got[0].extend(win.tolist()), got[1].extend(late.tolist()), got[2].extend(met.tolist())
            lo = hi
        assert got == want
        assert t.max_ts == int(ts.max()) and t.watermark == int(ts.max()) - MINUTE
        assert t.closed_before() == int(ts.max()) - MINUTE - 30 * S


def test_late_events_count_in_the_window_of_the_watermark_they_met():
    t = EventTime(MINUTE, 0, 0)
    starts, counts = t.late_windows(np.array([10 * MINUTE + 5, 10 * MINUTE + 7, 12 * MINUTE], dtype=np.int64))
    assert starts == [10 * MINUTE, 12 * MINUTE] and counts == [2, 1]


def test_a_window_closes_when_its_end_reaches_the_bound():
    assert closed(0, MINUTE, MINUTE) and not closed(0, MINUTE, MINUTE - 1)
    assert closed(5 * MINUTE, MINUTE, None)  # end of input
    fresh = EventTime(MINUTE, MINUTE, 0)
    assert not closed(0, MINUTE, fresh.closed_before())  # nothing seen: nothing closes
