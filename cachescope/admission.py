"""Admission filters: accesses a cache does not insert (tiers it excludes, files above a size).

An excluded read goes to the engine's bank with op `OP_BYPASS`: the bank counts it as a request
and a miss of its tier in each cache that samples its file (SHARDS), which is what a cache that
lets it pass by counts, and never inserts it. Writes and deletes always reach the bank (they
invalidate a cached copy whatever the filter). Used by the live pipeline (core/routing.py,
`pipeline.shadow.admission`); what-if replays (cachescope/replay.py) apply the same filter in the
store.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

from cachescope.units import parse_size


class AdmissionConfig(BaseModel):
    """`admission: {exclude_tiers: [PILEUP, UNMERGED], max_file_size: 10GB}` of a cache configuration."""

    model_config = ConfigDict(extra="forbid")
    #: data tiers the caches do not insert (their reads are requests and misses)
    exclude_tiers: list[str] = []
    #: files above this size (10GB, or bytes) are not inserted
    max_file_size: Optional[Union[int, str]] = None

    @field_validator("max_file_size")
    @classmethod
    def _size(cls, v):
        return None if v is None else parse_size(v)

    def __bool__(self) -> bool:
        return bool(self.exclude_tiers) or self.max_file_size is not None


def excluded(tier: np.ndarray, file_size: np.ndarray, op: np.ndarray, exclude_tiers: Sequence[str],
             max_file_size: int | None) -> np.ndarray:
    """Reads the filter keeps out of the cache."""
    out = np.zeros(len(op), dtype=bool)
    if exclude_tiers:
        out |= np.isin(tier.astype(str), np.asarray(list(exclude_tiers), dtype=str))
    if max_file_size is not None:
        out |= np.asarray(file_size, dtype=np.uint64) > np.uint64(max_file_size)
    return out & (np.asarray(op) == 0)
