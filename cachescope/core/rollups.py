"""The longer windows the core closes itself, beside the configured efficiency window: the same
shadow-cache counters summed into hours and days, emitted when their last window closed, so every
resolution agrees (tables `efficiency_hourly`, `efficiency_daily`)."""

from __future__ import annotations

from cachescope.core.cells import Cells
from cachescope.core.windows import closed
from cachescope.simulation import FIELDS

#: rollup name → its window length (µs)
ROLLUPS = {"hourly": 3_600_000_000, "daily": 86_400_000_000}


class Rollups:
    def __init__(self):
        # open windows: summed cells (window start, cache, tier, FIELDS) and the starts of the
        # windows that saw a closed efficiency window
        self.open: dict[str, Cells] = {name: Cells.empty(len(FIELDS)) for name in ROLLUPS}
        self.open_starts: dict[str, set[int]] = {name: set() for name in ROLLUPS}

    def add(self, done: list[int], eff: list[Cells]) -> None:
        """Closed efficiency windows (`done`: their starts, `eff`: their cells, pieces in window
        order): a window's counters join its hour, the hour's its day (summed on the way)."""
        adds = eff
        for name, length in ROLLUPS.items():
            self.open_starts[name].update(s - s % length for s in done)
            adds = [Cells(a.start - a.start % length, a.cache, a.tier, a.values).summed(length) for a in adds]
            self.open[name] = Cells.concat([self.open[name], *adds]).summed(length)

    def close(self, closed_before: int | None) -> dict[str, Cells]:
        """The cells of each rollup's windows that closed (rollups with none left out)."""
        out = {}
        for name, length in ROLLUPS.items():
            starts = self.open_starts[name]
            done = [s for s in starts if closed(s, length, closed_before)]
            if done:
                starts.difference_update(done)
                rows, self.open[name] = self.open[name].split(closed_before, length)
                if rows.n:
                    out[name] = rows
        return out
