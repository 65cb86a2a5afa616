"""cachescope.core.rollups.Rollups: closed efficiency windows summed into hours and days, each
closed once its last minute has."""

from __future__ import annotations

import numpy as np

from cachescope.core.cells import Cells
from cachescope.core.rollups import ROLLUPS, Rollups

MINUTE, HOUR, DAY = 60_000_000, 3_600_000_000, 86_400_000_000
T0 = 1_700_000_000_000_000 // DAY * DAY


def _minutes(rng, first: int, count: int) -> Cells:
    n = 400
    start = np.sort(T0 + (first + rng.integers(0, count, n)) * MINUTE)
    return Cells(start, rng.integers(0, 3, n), rng.integers(0, 2, n), rng.integers(0, 50, (n, 4)).astype(np.uint64)).summed(MINUTE)


def _sums(cells: list[Cells], length: int) -> dict[tuple[int, int, int], list[int]]:
    out: dict = {}
    for p in cells:
        for s, c, t, v in zip(p.start.tolist(), p.cache.tolist(), p.tier.tolist(), p.values.tolist()):
            k = (s - s % length, c, t)
            out[k] = [a + b for a, b in zip(out.get(k, [0] * 4), v)]
    return out


def test_hours_and_days_are_their_minutes_summed_and_close_when_their_last_minute_has():
    assert ROLLUPS == {"hourly": HOUR, "daily": DAY}
    rng = np.random.default_rng(1)
    r, fed = Rollups(), []
    for first in (0, 50, 100, 24 * 60 - 30):  # minutes of hours 0, 0-1, 1-2 and the day's last
        cells = _minutes(rng, first, 30)
        fed.append(cells)
        r.add(sorted(set(cells.start.tolist())), [cells])
    last = int(fed[-1].start.max())
    got = r.close(T0 + 2 * HOUR)  # hours 0 and 1 closed, the day not
    assert set(got) == {"hourly"}
    want = {k: v for k, v in _sums(fed, HOUR).items() if k[0] + HOUR <= T0 + 2 * HOUR}
    assert _sums([got["hourly"]], HOUR) == want and {k[0] for k in want} == {T0, T0 + HOUR}
    assert r.close(T0 + 2 * HOUR) == {}
    got = r.close(None)
    assert _sums([got["hourly"]], HOUR) == {k: v for k, v in _sums(fed, HOUR).items() if k[0] >= T0 + 2 * HOUR}
    assert _sums([got["daily"]], DAY) == _sums(fed, DAY) and last < T0 + DAY
    assert r.close(None) == {} and r.open_starts == {"hourly": set(), "daily": set()}


def test_a_window_without_cells_closes_its_hour_empty():
    r = Rollups()
    r.add([T0], [])
    assert r.open_starts["hourly"] == {T0} and r.close(None) == {}
