"""What counting residence ages costs the engine: the pipeline's 24 shadow caches (LRU, ARC,
S3-FIFO × 1–200 TB) fed a Zipf trace in batches with windows, as the processing core feeds them.

Four variants, each in a process of its own, run in turn (--repeat rounds, best of each):
  before         — another engine (--before PATH: its _simcore .so, e.g. main's), no timestamps
  before timed   — the same with timestamps (if that engine counts ages)
  untimed        — this engine, batches without timestamps (ages off: `cachescope simulate`, what-if)
  timed          — this engine, batches with timestamps (the pipeline: ages counted)
and prints events/s and the ratios, side by side on the same trace.

Run: .venv/bin/python scripts/bench_residence.py --before /work/main/cachescope/_simcore*.so
"""

from __future__ import annotations

import argparse
import glob
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("lru", "arc", "s3fifo")
SIZES_TB = (1, 2, 5, 10, 20, 50, 100, 200)


def _load(path: str):
    loader = importlib.machinery.ExtensionFileLoader("_simcore", path)
    spec = importlib.util.spec_from_file_location("_simcore", path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def child(so: str, timed: bool, requests: int, batch: int) -> dict:
    import numpy as np

    sys.path.insert(0, str(REPO))
    from cachescope.bench.workload import zipf_trace

    engine = _load(so)
    t = zipf_trace(requests)
    n = len(t.file_id)
    ts_s = (1_700_000_000 + np.arange(n) // 50).astype(np.uint32)  # 50 reads/s: a 2M trace spans 11 h
    window = (ts_s - ts_s[0]) // 60  # one-minute windows
    tier = np.zeros(n, np.uint8)
    op = np.zeros(n, np.uint8)
    specs = [{"policy": p, "capacity": s * 10**12, "params": {}, "sample_rate": 1.0, "partitions": 1}
             for p in POLICIES for s in SIZES_TB]
    bank = engine.Bank(specs, 8)
    fid, size = np.ascontiguousarray(t.file_id), np.ascontiguousarray(t.file_size)
    # engines since session 15 take the five columns as one tuple
    tupled = "cols" in (engine.Bank.feed.__text_signature__ or "")
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, n, batch):
        sl = slice(i, i + batch)
        w = (window[sl] - window[sl][0]).astype(np.uint32)
        cols = (fid[sl], size[sl], size[sl], tier[sl], op[sl])
        kw = {"window": w, **({"ts": ts_s[sl]} if timed else {})}
        bank.feed(cols, **kw) if tupled else bank.feed(*cols, **kw)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"events": n, "wall_s": wall, "cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the _simcore .so of another engine (e.g. main's)")
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=2, metavar=("SO", "TIMED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1] == "1", args.requests, args.batch)))
        return
    before = (glob.glob(args.before) or [args.before])[0]
    this = glob.glob(str(REPO / "cachescope" / "_simcore*.so"))[0]
    variants = {"before": (before, "0"), "before timed": (before, "1"), "untimed": (this, "0"), "timed": (this, "1")}
    best: dict[str, dict] = {}
    for _ in range(args.repeat):
        for name, (so, timed) in variants.items():
            out = subprocess.run([sys.executable, __file__, "--before", before, "--requests", str(args.requests),
                                  "--batch", str(args.batch), "--child", so, timed],
                                 capture_output=True, text=True, check=True, env={**os.environ})
            r = json.loads(out.stdout)
            if name not in best or r["wall_s"] < best[name]["wall_s"]:
                best[name] = r
    caches = len(POLICIES) * len(SIZES_TB)
    for name, r in best.items():
        print(f"{name:13s} {r['events'] / r['wall_s'] / 1e6:6.2f} M events/s "
              f"({r['events'] * caches / r['wall_s'] / 1e6:6.1f} M cache-accesses/s)  wall {r['wall_s']:.2f} s  "
              f"cpu {r['cpu_s']:.2f} s")
    for what in ("wall_s", "cpu_s"):  # CPU time: the work done, less sensitive to a loaded machine
        b = best["before"][what]
        print(f"{what[:-2]:4s}: timed/before {best['timed'][what] / b:.3f}   untimed/before "
              f"{best['untimed'][what] / b:.3f}   timed/untimed {best['timed'][what] / best['untimed'][what]:.3f}   "
              f"timed/before timed {best['timed'][what] / best['before timed'][what]:.3f}")
    print(f"(best of {args.repeat} by wall time; {args.requests:,} reads × {caches} caches, batches of {args.batch:,})")


if __name__ == "__main__":
    main()
