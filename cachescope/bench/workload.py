"""The benchmark workload: Zipf-popular files with log-normal sizes, generated in numpy."""

from __future__ import annotations

import numpy as np

from cachescope.simulation import Trace


def zipf_trace(requests: int = 5_000_000, files: int = 200_000, alpha: float = 0.9,
               min_size: int = 10 * 10**6, max_size: int = 5 * 10**9, seed: int = 7) -> Trace:
    """Zipf(alpha) over `files` files, sizes log-normal clipped to [min_size, max_size] bytes."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, files + 1, dtype=np.float64) ** alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(requests)), files - 1)
    ids = rng.integers(0, 2**64 - 1, size=files, dtype=np.uint64, endpoint=True)
    # median ~300 MB, long tail up to the clip: typical of grid data files
    sizes = np.clip(rng.lognormal(mean=np.log(3e8), sigma=1.2, size=files), min_size, max_size).astype(np.uint64)
    file_id = ids[ranks]
    file_size = sizes[ranks]
    return Trace(
        timestamp=np.arange(requests, dtype=np.float64),
        file_id=file_id,
        file_size=file_size,
        bytes_read=file_size.copy(),
        tier=np.zeros(requests, dtype=np.uint8),
        tier_names=["UNKNOWN"],
    )
