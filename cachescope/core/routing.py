"""Which reads reach a shard's shadow caches and how large its caches are: admission (excluded
reads bypass the caches: `pipeline.shadow.admission`) and the capacity split over shards, both
decided by the engine (op `OP_BYPASS`, `capacity_share`) as what-if's replays decide them.
"""

from __future__ import annotations

import numpy as np

from cachescope.admission import excluded
from cachescope.config.pipeline import PipelineConfig
from cachescope.core.cells import Cells
from cachescope.core.columns import EventColumns
from cachescope.core.shards import shard_of
from cachescope.simulation import OP_BYPASS, ShadowBank, capacity_share


class ShadowRouting:
    def __init__(self, config: PipelineConfig, shard: int):
        self.shards = config.shards
        self.shard = shard
        self.admission = config.shadow.admission

    def share(self, capacity: int) -> int:
        """This shard's part of a capacity: as the bank splits a partitioned cache, so that the
        shards of a group together are exactly one cache of `partitions = shards`."""
        return capacity_share(capacity, self.shards, self.shard)

    def mine(self, file_id: np.ndarray) -> np.ndarray:
        """Which files are this shard's (all when the group is not spread)."""
        if self.shards == 1:
            return np.ones(len(file_id), dtype=bool)
        return shard_of(file_id, self.shards) == self.shard

    def feed(self, bank: ShadowBank, ev: EventColumns, tier: np.ndarray, index: np.ndarray, tiers_used: int,
             parallel: bool) -> Cells:
        """Feed one batch to the bank (`index`: each event's window number) and return its cells;
        a read the admission filter excludes goes as `OP_BYPASS`: a request and a miss of its tier
        in every cache that samples the file, never inserted (writes and deletes always reach it)."""
        adm = self.admission
        op = ev.op
        if adm:
            out = excluded(ev.tier, ev.file_size, ev.op, adm.exclude_tiers, adm.max_file_size)
            if out.any():
                op = np.where(out, OP_BYPASS, ev.op).astype(np.uint8)
        # durations as the engine takes them: 0 = not known (the column's null is -1)
        duration = ev.duration_us.clip(0).astype(np.uint64) if (ev.duration_us > 0).any() else None
        return Cells.of(bank.feed_cells(ev.file_id, ev.file_size, ev.bytes_read, tier, op, index,
                                        tiers_used=tiers_used, ts=ev.ts, parallel=parallel, duration_us=duration))
