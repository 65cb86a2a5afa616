"""Which reads reach a shard's shadow caches and how large its caches are: admission (excluded
reads bypass the caches: `pipeline.shadow.admission`) and the capacity split over shards.

Kept together in one place on purpose: the engine is to take both over (an admit decision per read
and partitions routed in the bank), and then only this module changes.
"""

from __future__ import annotations

import numpy as np

from cachescope.admission import excluded, sampled_mask
from cachescope.config.pipeline import PipelineConfig
from cachescope.core.cells import Cells
from cachescope.core.columns import EventColumns
from cachescope.core.shards import shard_of
from cachescope.simulation import FIELDS, ShadowBank

F_REQUESTS, F_BYTES_REQUESTED = FIELDS.index("requests"), FIELDS.index("bytes_requested")


class ShadowRouting:
    def __init__(self, config: PipelineConfig, shard: int):
        self.shards = config.shards
        self.shard = shard
        self.admission = config.shadow.admission

    def share(self, capacity: int) -> int:
        """This shard's part of a capacity: as the bank splits a partitioned cache, so that the
        shards of a group together are exactly one cache of `partitions = shards`."""
        k = self.shards
        return capacity // k + int(self.shard < capacity % k)

    def mine(self, file_id: np.ndarray) -> np.ndarray:
        """Which files are this shard's (all when the group is not spread)."""
        if self.shards == 1:
            return np.ones(len(file_id), dtype=bool)
        return shard_of(file_id, self.shards) == self.shard

    def feed(self, bank: ShadowBank, ev: EventColumns, tier: np.ndarray, index: np.ndarray, tiers_used: int,
             parallel: bool) -> Cells:
        """Feed one batch to the bank (`index`: each event's window number) and return its cells,
        excluded reads counted beside the engine (`bypassed`)."""
        adm = self.admission
        out = excluded(ev.tier, ev.file_size, ev.op, adm.exclude_tiers, adm.max_file_size) if adm else None
        if out is None or not out.any():
            return Cells.of(bank.feed_cells(ev.file_id, ev.file_size, ev.bytes_read, tier, ev.op, index,
                                            tiers_used=tiers_used, ts=ev.ts, parallel=parallel))
        keep = ~out
        return Cells.concat([
            Cells.of(bank.feed_cells(ev.file_id[keep], ev.file_size[keep], ev.bytes_read[keep], tier[keep],
                                     ev.op[keep], index[keep], tiers_used=tiers_used, ts=ev.ts[keep],
                                     parallel=parallel)),
            self.bypassed(bank, index[out], tier[out], ev.bytes_read[out], ev.file_id[out])]).summed(1)

    @staticmethod
    def bypassed(bank: ShadowBank, index: np.ndarray, tier: np.ndarray, nbytes: np.ndarray,
                 file_id: np.ndarray) -> Cells:
        """Excluded reads as cells: a request and its bytes, no hit, in every cache that samples
        the file (what the what-if counts for them)."""
        parts = []
        for c, spec in enumerate(bank.specs):
            m = sampled_mask(file_id, spec.sample_rate) if spec.sample_rate < 1 else slice(None)
            n = len(index[m])
            values = np.zeros((n, len(FIELDS)), dtype=np.uint64)
            values[:, F_REQUESTS] = 1
            values[:, F_BYTES_REQUESTED] = nbytes[m]
            parts.append(Cells(index[m].astype(np.int64), np.full(n, c, dtype=np.int64), tier[m].astype(np.int64), values))
        return Cells.concat(parts)
