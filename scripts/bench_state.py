#!/usr/bin/env python3
"""State size per shadow cache and per cache group, from the processing core itself.

Feeds a synthetic stream (each of N distinct files read twice, in random order over one day,
file sizes log-normal around 1.5 GB as ATLAS/CMS data files) into one GroupProcessor and prints
the size of its checkpointed state: GroupProcessor.snapshot() (the bank, the LRU curve, the open
windows) and the pickled GroupState that Flink keeps per key (snapshot + rows not yet written).
Configurations: one cache (lru 200TB, no curve), the default bank (lru, arc, s3fifo × 8 sizes
1–200 TB = 24 caches) with and without the 64-point curve, and 48 caches (6 policies × 8 sizes).

    PYTHONPATH=. python scripts/bench_state.py [--files 10000,100000,1000000]

Figures and how they feed the sizing: deploy/README.md.
"""

from __future__ import annotations

import argparse
import pickle
import time

import msgspec
import numpy as np

from cachescope.core.columns import NO_OBSERVATION, EventColumns
from cachescope.config import PipelineConfig
from cachescope.core.group_state import GroupState

SIZES = ["1TB", "2TB", "5TB", "10TB", "20TB", "50TB", "100TB", "200TB"]
CONFIGS = {
    "1 cache (lru 200TB), no curve": {"shadow": {"policies": ["lru"], "sizes": ["200TB"]}, "curve": {"enabled": False}},
    "24 caches, no curve": {"shadow": {"policies": ["lru", "arc", "s3fifo"], "sizes": SIZES}, "curve": {"enabled": False}},
    "24 caches + 64-point curve (default)": {},
    "48 caches + curve": {"shadow": {"policies": ["lru", "arc", "s3fifo", "sieve", "twoq", "wtinylfu"], "sizes": SIZES}},
}


def stream(n_files: int, seed: int = 1) -> EventColumns:
    rng = np.random.default_rng(seed)
    files = np.concatenate([np.arange(n_files), rng.permutation(n_files)])  # every file read twice
    n = len(files)
    sizes = np.exp(rng.normal(np.log(1.5e9), 1.0, n_files)).astype(np.uint64) + 1
    ts = np.sort(rng.integers(0, 86_400_000_000, n)).astype(np.int64) + 1_700_000_000_000_000
    s = np.empty(n, dtype=object)
    s[:] = ""
    tiers = np.array(["AOD", "DAOD_PHYS", "HITS", "EVNT", "MINIAOD", "NANOAOD", "RAW", "USER"], dtype=object)
    fid = (files.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(0x5555)
    obs = np.full(n, NO_OBSERVATION, dtype=np.int64)
    return EventColumns(ts=ts, seq=np.arange(n, dtype=np.uint64), file_id=fid, file_size=sizes[files],
                        bytes_read=sizes[files], op=np.zeros(n, dtype=np.uint8), tier=tiers[files % len(tiers)],
                        server=s, source=s, site=s, client=s, vo=s, path=s, cache_group=s, origin=s,
                        observed_hit_bytes=obs, observed_miss_bytes=obs, observed_bypass_bytes=obs,
                        observed_hit=np.full(n, NO_OBSERVATION, dtype=np.int8), observed_origin_bytes=obs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", default="10000,100000,1000000", help="distinct files per cache group (comma list)")
    ap.add_argument("--batch", type=int, default=2500, help="events per batch (the shippers' message size)")
    a = ap.parse_args()
    print(f"{'files':>9} {'events':>9}  {'configuration':<38} {'snapshot':>10} {'bank':>10} {'curve':>10} "
          f"{'GroupState':>11} {'B/file/cache':>12} {'core ev/s':>10}")
    for n_files in (int(x) for x in a.files.split(",")):
        ev = stream(n_files)
        for name, cfg in CONFIGS.items():
            config = PipelineConfig.model_validate(cfg)
            state = GroupState.new("g", config, keep_events=False)
            t0 = time.perf_counter()
            for i in range(0, len(ev), a.batch):
                state.process(ev.take(np.arange(i, min(i + a.batch, len(ev)))))
                state.outbox.drain()  # rows written and confirmed: what stays is the state proper
            dt = time.perf_counter() - t0
            snap = state.processor.snapshot()
            parts = msgspec.msgpack.decode(snap)
            bank, curve = len(parts["bank"]), len(parts["curve"] or b"")
            pickled = len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
            n_caches = len(config.shadow.specs())
            print(f"{n_files:>9,} {len(ev):>9,}  {name:<38} {len(snap)/1e6:>8.2f}MB {bank/1e6:>8.2f}MB "
                  f"{curve/1e6:>8.2f}MB {pickled/1e6:>9.2f}MB {bank/n_files/n_caches:>12.1f} {len(ev)/dt:>10,.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
