"""The workload's data: the file catalogue and one row per access (the ground truth)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OP_READ, OP_WRITE, OP_DELETE = 0, 1, 2
DAY_US = 86_400_000_000
HOUR_US = 3_600_000_000
GIB = 2**30
MIB = 2**20


@dataclass
class Catalogue:
    """Files of the workload: canonical (normalised) path and naming parts per file."""

    path: list[str]  # normalised: /atlas/rucio/<scope>/<h1>/<h2>/<name> or /store/...
    vo: np.ndarray  # 0 atlas, 1 cms
    tier: list[str]
    size: np.ndarray  # uint64
    scope: list[str]  # rucio scope ("cms" for CMS)
    name: list[str]  # rucio name (the LFN for CMS)


@dataclass
class Workload:
    """Ground truth: one row per access, sorted by ts."""

    ts: np.ndarray  # int64 UTC us, start of the access
    duration: np.ndarray  # int64 us
    file: np.ndarray  # int64 index into catalogue
    op: np.ndarray  # uint8
    bytes_read: np.ndarray  # uint64 (writes: bytes written; deletes: 0)
    site: np.ndarray  # int64 index into sites
    server: np.ndarray  # int64 storage server (pool/file server) index within the site
    cache_server: np.ndarray  # int64 XCache server index within the site
    client: np.ndarray  # int64 worker-node index within the site
    bypass: np.ndarray  # bool: the XCache read bypasses the cache
    catalogue: Catalogue
    sites: list[str]
    n_servers: int
    seed: int
    start_us: int
    days: float
    _observed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.ts)

    def observed(self, cache_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """XCache hit/miss/bypass bytes of every read (LRU per site and cache server)."""
        if self._observed is None:
            from ingest.generate.xcache import simulate_xcache  # the model needs the data classes

            self._observed = simulate_xcache(self, cache_fraction)
        return self._observed
