"""Small deterministic event streams for core tests (the realistic generator lives in ingest)."""

from __future__ import annotations

import numpy as np

from cachescope.core.columns import NO_OBSERVATION, EventColumns

TIERS = np.array(["AOD", "DAOD_PHYS", "HITS", "USER"], dtype=object)


def event_stream(n: int = 20_000, files: int = 400, seed: int = 1, start_us: int = 1_700_000_000_000_000,
                 jitter_us: int = 20_000_000, deletes: float = 0.01, observed: bool = True) -> EventColumns:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.3, n) - 1, files - 1)
    ids = rng.integers(1, 2**64 - 1, size=files, dtype=np.uint64)
    sizes = rng.integers(10**8, 6 * 10**9, size=files, dtype=np.uint64)
    file_id, file_size = ids[ranks], sizes[ranks]
    partial = rng.random(n) < 0.3
    bytes_read = np.where(partial, file_size // 3, file_size).astype(np.uint64)
    # mostly increasing timestamps (~1 s apart) with bounded disorder
    ts = start_us + np.arange(n, dtype=np.int64) * 1_000_000 + (rng.integers(-jitter_us, jitter_us, n) if jitter_us else 0)
    op = np.where(rng.random(n) < deletes, 2, 0).astype(np.uint8)
    obs = observed & (rng.random(n) < 0.5)
    hit = np.where(obs, bytes_read // 2, NO_OBSERVATION).astype(np.int64)
    miss = np.where(obs, bytes_read - bytes_read // 2, NO_OBSERVATION).astype(np.int64)
    return EventColumns(
        ts=ts, seq=np.arange(n, dtype=np.uint64), file_id=file_id, file_size=file_size, bytes_read=bytes_read,
        op=op, tier=TIERS[ranks % len(TIERS)], server=np.array(["xcache-1", "xcache-2"], dtype=object)[ranks % 2],
        source=np.full(n, "xrootd-gstream", dtype=object), site=np.full(n, "SITE-A", dtype=object),
        client=np.full(n, "", dtype=object), vo=np.full(n, "atlas", dtype=object),
        path=np.array([f"/atlas/rucio/f{r}" for r in ranks], dtype=object),
        cache_group=np.full(n, "site-A", dtype=object), observed_hit_bytes=hit, observed_miss_bytes=miss,
        observed_bypass_bytes=np.where(obs, 0, NO_OBSERVATION).astype(np.int64),
        observed_hit=np.full(n, NO_OBSERVATION, dtype=np.int8),
        observed_origin_bytes=np.full(n, NO_OBSERVATION, dtype=np.int64),
        origin=np.full(n, "file:test-host:/var/log/xrootd/gstream.log", dtype=object),
    )
