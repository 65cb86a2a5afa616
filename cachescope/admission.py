"""Admission filters: accesses a cache does not insert (tiers it excludes, files above a size).

The engine's bank has no "do not insert" flag, so an excluded read is not fed to it; it is
counted here instead as a request and a miss of its tier, for each cache that samples its file
(SHARDS), which is what a cache that bypasses it would count. Writes and deletes always reach
the bank (they invalidate a cached copy whatever the filter). Used by the live pipeline
(processor, `pipeline.shadow.admission`) and by what-if replays (cachescope/replay.py).
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

from cachescope.units import parse_size

_SAMPLE_MODULUS = 1 << 24


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


def _mix64(x: np.ndarray) -> np.ndarray:
    """The engine's splitmix64 finaliser (simcore/src/util/hash.rs), vectorised."""
    x = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def sampled_mask(file_id: np.ndarray, rate: float) -> np.ndarray:
    """Which files the engine's SHARDS sampling at `rate` simulates (its exact rule)."""
    threshold = min(max(int(round(rate * _SAMPLE_MODULUS)), 1), _SAMPLE_MODULUS)
    if threshold == _SAMPLE_MODULUS:
        return np.ones(len(file_id), dtype=bool)
    return (_mix64(file_id) & np.uint64(_SAMPLE_MODULUS - 1)) < np.uint64(threshold)
