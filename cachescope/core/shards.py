"""Spreading one cache group over several keyed sub-streams (pipeline.shards).

Files are routed by the same hash the bank uses for partitioned caches, so the shards of a
group together compute exactly one cache with `partitions = shards`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cachescope.core.columns import EventColumns
from cachescope.simulation import partition_of


def shard_of(file_id: np.ndarray, shards: int) -> np.ndarray:
    return partition_of(np.ascontiguousarray(file_id, dtype=np.uint64), shards)


def split(events: EventColumns, shards: int) -> Iterator[tuple[int, EventColumns]]:
    """(shard, its events in arrival order) for every shard that has events."""
    if shards == 1:
        if len(events):
            yield 0, events
        return
    which = shard_of(events.file_id, shards)
    for k in np.unique(which).tolist():
        yield int(k), events.take(np.flatnonzero(which == k))


def shard_key(cache_group: str, shard: int, shards: int) -> str:
    """The keyed-state key of a shard ("group" when the group is not spread)."""
    return cache_group if shards == 1 else f"{cache_group}#{shard}"
