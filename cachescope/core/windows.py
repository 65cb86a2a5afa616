"""Event time of one cache group: the watermark, which events are late, which windows closed.

The watermark is the largest timestamp seen so far minus the bounded out-of-orderness, evaluated
per event (a running maximum: the same whatever the batches); an event is late when its
efficiency window already closed (window end + allowed lateness ≤ the watermark it met). A window
of `length` closes once its end ≤ watermark − allowed lateness.
"""

from __future__ import annotations

import numpy as np

NEG_INF = np.iinfo(np.int64).min // 2


class EventTime:
    def __init__(self, window_us: int, ooo_us: int, lateness_us: int):
        self.window_us = window_us
        self.ooo_us = ooo_us
        self.lateness_us = lateness_us
        self.max_ts = NEG_INF

    @property
    def watermark(self) -> int:
        return self.max_ts - self.ooo_us

    def closed_before(self) -> int:
        """Windows that end at or before this are closed."""
        return self.watermark - self.lateness_us

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One batch's timestamps (arrival order): each event's efficiency window start, which are
        late, and the watermark each late event met; the watermark moves past the batch."""
        ts = ts.astype(np.int64, copy=False)
        # watermark each event saw: from everything before it (running max, batch-independent)
        seen_max = np.maximum.accumulate(np.concatenate(([self.max_ts], ts)))[:-1]
        win = ts - ts % self.window_us
        late = win + self.window_us + self.lateness_us <= seen_max - self.ooo_us
        self.max_ts = max(self.max_ts, int(seen_max[-1]), int(ts[-1]))
        return win, late, seen_max[late] - self.ooo_us

    def late_windows(self, met: np.ndarray) -> tuple[list[int], list[int]]:
        """Late events counted in the (open) window of the watermark each met: (starts, counts)."""
        lw, n_late = np.unique(met - met % self.window_us, return_counts=True)
        return lw.tolist(), n_late.tolist()


def closed(start: int, length: int, closed_before: int | None) -> bool:
    """Whether the window [start, start + length) is closed (closed_before None: all are)."""
    return closed_before is None or start + length <= closed_before
