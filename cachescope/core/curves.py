"""The LRU miss-ratio curve of one cache group (or shard): the engine's one-pass curve over the
configured capacity grid, summed per curve window and emitted as rows of table `mrc` when the
window closes."""

from __future__ import annotations

import numpy as np

from cachescope.config.pipeline import PipelineConfig
from cachescope.core.cells import constant, us_to_datetime
from cachescope.core.columns import EventColumns
from cachescope.core.routing import ShadowRouting
from cachescope.core.windows import closed
from cachescope.simulation import LruCurve


class Curves:
    def __init__(self, config: PipelineConfig, routing: ShadowRouting):
        self.n_tiers = config.n_tiers
        self.window_us = config.windows.us("curve")
        self.grid = np.asarray(config.curve.grid(), dtype=np.uint64)  # as configured: the labels of the rows
        self.curve = LruCurve([routing.share(int(c)) for c in self.grid], config.n_tiers,
                              config.curve.sample_rate, config.curve.max_objects)
        #: open windows: start → hits (grid, tiers, [requests, bytes]) and requested (tiers, [requests, bytes])
        self.open: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def feed(self, ev: EventColumns, win: np.ndarray, tier: np.ndarray) -> None:
        """Feed one batch of on-time events (`win`: their efficiency windows, `tier`: their codes)."""
        cwin = win - win % self.window_us
        cstarts, cindex = np.unique(cwin, return_inverse=True)
        hits, requested = self.curve.feed(ev.file_id, ev.file_size, ev.bytes_read, tier, ev.op,
                                          window=cindex.astype(np.uint32).reshape(-1))
        for i, start in enumerate(cstarts.tolist()):
            acc = self.open.get(start)
            if acc is None:
                self.open[start] = (hits[i], requested[i])
            else:
                acc[0][...] += hits[i]
                acc[1][...] += requested[i]

    def close(self, closed_before: int | None, cache_group: str, shard: int, run: int,
              tier_names: list[str]) -> dict[str, np.ndarray] | None:
        """Rows of the windows that closed, or None."""
        done = sorted(s for s in self.open if closed(s, self.window_us, closed_before))
        if not done:
            return None
        grid = self.grid
        parts = []
        for s in done:
            hits, requested = self.open.pop(s)  # (K, tiers, 2), (tiers, 2)
            tiers = np.flatnonzero(requested[:, 0] > 0)
            k, t = np.meshgrid(np.arange(len(grid)), tiers, indexing="ij")
            k, t = k.reshape(-1), t.reshape(-1)
            parts.append((np.full(len(k), s, dtype=np.int64), k, t, hits[k, t], requested[t]))
        start = np.concatenate([p[0] for p in parts])
        k = np.concatenate([p[1] for p in parts])
        t = np.concatenate([p[2] for p in parts])
        hits = np.concatenate([p[3] for p in parts]).reshape(-1, 2)
        req = np.concatenate([p[4] for p in parts]).reshape(-1, 2)
        names = np.array(tier_names + [""] * (self.n_tiers - len(tier_names)), dtype=object)
        return {
            "window_start": us_to_datetime(start),
            "cache_group": constant(len(k), cache_group),
            "tier": names[t],
            "capacity_bytes": grid[k],
            "requests": req[:, 0],
            "hits": hits[:, 0],
            "bytes_requested": req[:, 1],
            "bytes_hit": hits[:, 1],
            "sample_rate": np.full(len(k), self.curve.sample_rate, dtype=np.float64),
            "shard": np.full(len(k), shard, dtype=np.uint16),
            "run": np.full(len(k), run, dtype=np.uint64),
        }
