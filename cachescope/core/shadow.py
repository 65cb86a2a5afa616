"""The shadow caches of one cache group (or shard) and the counters of their open efficiency
windows: cells (window start, cache, tier, FIELDS), one per key, as window-disjoint pieces in
window order (a batch's cells are kept as the engine returned them instead of copied behind the
earlier windows), and the starts of the windows that saw events (a window of only writes or
deletes closes too: alerts count it)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cachescope.config.pipeline import PipelineConfig
from cachescope.core.cells import Cells, positions
from cachescope.core.columns import EventColumns
from cachescope.core.efficiency_rows import EfficiencyRows
from cachescope.core.routing import ShadowRouting
from cachescope.core.tier_codes import TierCodes
from cachescope.core.windows import closed
from cachescope.simulation import FIELDS, ShadowBank, sum_by_key

F_EVICTIONS = FIELDS.index("evictions")


class ShadowWindows:
    def __init__(self, config: PipelineConfig, routing: ShadowRouting, window_us: int, parallel: bool = True):
        self.specs = config.shadow.specs()  # as configured: the labels of the rows
        self.n_tiers = config.n_tiers
        self.routing = routing
        self.window_us = window_us
        # the shadow caches on all cores (`ShadowBank.feed_cells`)? The adapter decides, not the
        # state: in the Flink job the processing thread is the chain the stream waits for; in the
        # embedded replay it is the store writer's thread, which the second core is then left to
        self.parallel = parallel
        self.bank = ShadowBank([replace(s, capacity=routing.share(s.capacity)) for s in self.specs], config.n_tiers)
        self.tiers = TierCodes(config.n_tiers)
        self.open: list[Cells] = []
        self.open_starts: set[int] = set()
        #: counters (caches, FIELDS) summed over the efficiency windows emitted, and which caches
        #: had a row (requests or evictions): a replay's totals without reading rows
        self.emitted_totals = np.zeros((len(self.specs), len(FIELDS)), dtype=np.uint64)
        self.emitted_any = np.zeros(len(self.specs), dtype=bool)

    @property
    def shape(self) -> tuple[int, int, int]:
        """A window's dense counters: (caches, tiers, fields)."""
        return (len(self.specs), self.n_tiers, len(FIELDS))

    def feed(self, ev: EventColumns, win: np.ndarray) -> np.ndarray:
        """Feed one batch of on-time events (`win`: their window starts); returns their tier codes."""
        tier = self._tier_codes(ev.tier, win)
        self.open_starts.update(np.unique(win).tolist())
        # the engine numbers windows within the batch and returns only the cells it touched
        low = int(win.min())
        index = (win - low) // self.window_us
        starts = None
        if int(index.max()) >= 2**32:  # a batch over 136 years of 1-s windows: number the windows seen
            starts, index = np.unique(win, return_inverse=True)
            index = index.reshape(-1)
        cells = self.routing.feed(self.bank, ev, tier, index, len(self.tiers.names), self.parallel)
        cells.start = cells.start * self.window_us + low if starts is None else starts[cells.start]
        # the open windows' cells stay one per (window, cache, tier), however many batches a window
        # spans (a live stream feeds each minute in hundreds of messages)
        self.open = Cells.add_to_pieces(self.open, cells, self.window_us)
        return tier

    def _tier_codes(self, tiers: np.ndarray, win: np.ndarray) -> np.ndarray:
        """Tier codes, new names numbered as they always were: sorted within each run of 64
        windows of a batch (the runs the engine was once fed in), so rows keep their order."""
        idx = np.unique(win, return_inverse=True)[1].reshape(-1)
        cuts = np.flatnonzero(np.diff(np.maximum.accumulate(idx) // 64)) + 1
        if len(cuts) == 0:
            return self.tiers.encode(tiers)
        return np.concatenate([self.tiers.encode(part) for part in np.split(tiers, cuts)])

    def close(self, closed_before: int | None) -> tuple[list[int], list[Cells]]:
        """The windows that closed (sorted starts) and their cells (pieces in window order)."""
        done = sorted(s for s in self.open_starts if closed(s, self.window_us, closed_before))
        if not done:
            return done, []
        self.open_starts.difference_update(done)
        eff, self.open = Cells.split_pieces(self.open, closed_before, self.window_us)
        return done, eff

    def alert_counters(self, done: list[int], eff: list[Cells]) -> np.ndarray:
        """requests, hits, bytes_requested, bytes_hit per (closed window, cache), all tiers:
        (windows, caches, 4) int64 (wrapping as int64 adds do)."""
        # summed by (window, cache) in compiled code (np.add.at and a dict per cell cost more
        # than the rest)
        n_c = len(self.specs)
        counters = np.zeros((len(done) * n_c, 4), dtype=np.uint64)
        done_starts = np.asarray(done, dtype=np.int64)
        for piece in eff:  # pieces hold disjoint windows
            flat = positions(done_starts, piece.start) * n_c + piece.cache
            at, sums = sum_by_key(flat, piece.values[:, :4])
            counters[flat[at]] = sums
        return counters.reshape(len(done), n_c, 4).view(np.int64)

    def rows(self, pieces: list[Cells], length_us: int, cache_group: str, shard: int, run: int,
             totals: bool = False) -> EfficiencyRows | None:
        """Rows of summed cells (pieces in window order, each sorted by window, cache, tier): those
        with requests or evictions, as cells; the writer makes their columns. `totals`: added to
        `emitted_totals`."""
        kept = []
        for cells in pieces:
            keep = (cells.values[:, 0] > 0) | (cells.values[:, F_EVICTIONS] > 0)
            cells = cells if keep.all() else cells[np.flatnonzero(keep)]
            if not cells.n:
                continue
            kept.append(cells)
            if totals:  # (counters of the other (cache, tier) cells are 0: no request, no eviction)
                at, sums = sum_by_key(cells.cache, cells.values)
                self.emitted_totals[cells.cache[at]] += sums
                self.emitted_any[cells.cache[at]] = True
        if not kept:
            return None
        return EfficiencyRows(kept, length_us, cache_group, shard, run, self.specs, self.tiers.names)
