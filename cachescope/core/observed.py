"""The real cache's own numbers (XCache records carry them) for the same windows as the shadow
caches: per (window, server, tier), one row per key, summed as records arrive."""

from __future__ import annotations

import numpy as np

from cachescope.core.cells import Cells, constant, us_to_datetime
from cachescope.core.columns import NO_OBSERVATION, EventColumns

#: hits: accesses for which the real cache fetched nothing from the origin, by its own verdict
#: (AccessEvent.observed_hit); a record without one: served wholly from disk by its byte counters
#: (hit bytes, no miss or bypass bytes: the older rule, which counts a block XrdPfc was already
#: fetching as a hit)
OBSERVED_FIELDS = ("accesses", "bytes_read", "hit_bytes", "miss_bytes", "bypass_bytes", "hits")


def no_cells() -> Cells:
    return Cells.empty(len(OBSERVED_FIELDS), np.int64, object)


class RealCache:
    def __init__(self, window_us: int):
        self.window_us = window_us
        self.open = no_cells()

    def observe(self, ev: EventColumns, win: np.ndarray) -> None:
        """Add one batch's reads that carry the real cache's numbers (`win`: their window starts)."""
        has = (ev.op == 0) & ((ev.observed_hit_bytes != NO_OBSERVATION) | (ev.observed_miss_bytes != NO_OBSERVATION)
                              | (ev.observed_hit != NO_OBSERVATION))
        if not has.any():
            return
        idx = np.flatnonzero(has)
        hit, miss, bypass = (np.maximum(c[idx], 0) for c in (ev.observed_hit_bytes, ev.observed_miss_bytes,
                                                                ev.observed_bypass_bytes))
        verdict = ev.observed_hit[idx]
        hits = np.where(verdict != NO_OBSERVATION, verdict == 1, (hit > 0) & (miss == 0) & (bypass == 0))
        values = np.stack([np.ones(len(idx), dtype=np.int64), ev.bytes_read[idx].astype(np.int64), hit, miss, bypass,
                           hits.astype(np.int64)], axis=1)
        self.open = Cells.concat([self.open, Cells(win[idx], ev.server[idx], ev.tier[idx], values)]).summed(self.window_us)

    def close(self, closed_before: int | None) -> Cells | None:
        """The cells of the windows that closed, or None."""
        if not self.open.n:
            return None
        obs, self.open = self.open.split(closed_before, self.window_us)
        return obs if obs.n else None

    @staticmethod
    def alert_sums(obs: Cells) -> tuple[list[int], np.ndarray]:
        """Per closed window: hit, miss and bypass bytes, all servers and tiers (rows come sorted by window)."""
        at = np.flatnonzero(np.r_[True, obs.start[1:] != obs.start[:-1]])
        return obs.start[at].tolist(), np.add.reduceat(obs.values[:, 2:5], at, axis=0)

    @staticmethod
    def rows(obs: Cells, cache_group: str, shard: int, run: int) -> dict[str, np.ndarray]:
        """Rows of table `observed`."""
        rows = {
            "window_start": us_to_datetime(obs.start),
            "cache_group": constant(obs.n, cache_group),
            "server": obs.server,
            "tier": obs.tier,
        }
        for i, name in enumerate(OBSERVED_FIELDS):
            rows[name] = obs.values[:, i].astype(np.uint64)
        rows["shard"] = np.full(obs.n, shard, dtype=np.uint16)
        rows["run"] = np.full(obs.n, run, dtype=np.uint64)
        return rows
