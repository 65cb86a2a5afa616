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
#: origin_*: over the accesses whose record carries the bytes fetched from the origin (b_todisk +
#: b_bypass, XRootD >= 5.7.2): their count, bytes read, origin bytes, bytes served from the cache
#: (a hit all its bytes, a miss its bytes read - min(bytes read, origin bytes): exact for whole-file
#: reads) and b_hit; verdict_hit_bytes: the bytes read of the others' hits (what they surely took
#: from the cache: the lower bound, b_hit the upper one); verdict_accesses: the others that carry the
#: cache's verdict (XRootD 5.5 g-stream `remotes`): where the real-vs-shadow alert compares hit efficiency
OBSERVED_FIELDS = ("accesses", "bytes_read", "hit_bytes", "miss_bytes", "bypass_bytes", "hits", "origin_accesses",
                   "origin_bytes_read", "origin_bytes", "origin_cache_bytes", "origin_hit_bytes", "verdict_hit_bytes",
                   "verdict_accesses")


def no_cells() -> Cells:
    return Cells.empty(len(OBSERVED_FIELDS), np.int64, object)


class RealCache:
    def __init__(self, window_us: int):
        self.window_us = window_us
        self.open = no_cells()

    def observe(self, ev: EventColumns, win: np.ndarray) -> None:
        """Add one batch's reads that carry the real cache's numbers (`win`: their window starts)."""
        has = (ev.op == 0) & ((ev.observed_hit_bytes != NO_OBSERVATION) | (ev.observed_miss_bytes != NO_OBSERVATION)
                              | (ev.observed_hit != NO_OBSERVATION) | (ev.observed_origin_bytes != NO_OBSERVATION))
        if not has.any():
            return
        idx = np.flatnonzero(has)
        hit, miss, bypass = (np.maximum(c[idx], 0) for c in (ev.observed_hit_bytes, ev.observed_miss_bytes,
                                                                ev.observed_bypass_bytes))
        verdict = ev.observed_hit[idx]
        hits = np.where(verdict != NO_OBSERVATION, verdict == 1, (hit > 0) & (miss == 0) & (bypass == 0))
        nbytes = ev.bytes_read[idx].astype(np.int64)
        origin = ev.observed_origin_bytes[idx]
        known = origin != NO_OBSERVATION
        cache = np.where(hits, nbytes, nbytes - np.minimum(nbytes, np.maximum(origin, 0)))
        values = np.stack([np.ones(len(idx), dtype=np.int64), nbytes, hit, miss, bypass, hits.astype(np.int64),
                           known.astype(np.int64), np.where(known, nbytes, 0), np.where(known, origin, 0),
                           np.where(known, cache, 0), np.where(known, hit, 0), np.where(~known & hits, nbytes, 0),
                           (~known & (verdict != NO_OBSERVATION)).astype(np.int64)],
                          axis=1)
        self.open = Cells.concat([self.open, Cells(win[idx], ev.server[idx], ev.tier[idx], values)]).summed(self.window_us)

    def close(self, closed_before: int | None) -> Cells | None:
        """The cells of the windows that closed, or None."""
        if not self.open.n:
            return None
        obs, self.open = self.open.split(closed_before, self.window_us)
        return obs if obs.n else None

    @staticmethod
    def alert_sums(obs: Cells) -> tuple[list[int], np.ndarray]:
        """Per closed window, all servers and tiers (rows come sorted by window): hit, miss and bypass
        bytes, accesses, hits, bytes read, accesses with origin bytes, their bytes served from the
        cache, accesses with a verdict but no origin bytes (the alert evaluator's real-cache columns)."""
        at = np.flatnonzero(np.r_[True, obs.start[1:] != obs.start[:-1]])
        f = OBSERVED_FIELDS.index
        cols = [f(n) for n in ("hit_bytes", "miss_bytes", "bypass_bytes", "accesses", "hits", "bytes_read",
                               "origin_accesses", "origin_cache_bytes", "verdict_accesses")]
        return obs.start[at].tolist(), np.add.reduceat(obs.values[:, cols], at, axis=0)

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
