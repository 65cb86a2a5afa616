"""The `xcache` model's speed with delayed hits on and off, side by side, on one trace.

A trace of --requests reads (default 1 M) is written once as a `cachescope simulate` CSV
(`timestamp,obj_id,obj_size,bytes_read`): Zipf(0.9) popularity over 200 k files of 20 MB–2 GB,
ROOT-like partial reads (10–30 % of a file) mixed with whole-file copies, 20 reads a second.
Then the whole `cachescope simulate` process runs --repeat times per variant (best of each):

  off        — xcache, instant fetches (the default: no delayed hits)
  on         — xcache with `origin_rate` (fetches take time: delayed hits counted)
  on+prefetch — the same with `prefetch` 10 (prefetch in time)

and prints wall and user CPU seconds (best of each; the whole process: reading the CSV is most of
it), requests/s, hit efficiency and delayed hits of each.

Run: .venv/bin/python scripts/bench_delayed.py [--requests 1000000] [--size 20TB] [--rate 1Gbit/s]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_trace(path: Path, requests: int, files: int, seed: int = 36) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, files + 1, dtype=np.float64)
    p = ranks ** -0.9
    p /= p.sum()
    ids = rng.choice(files, size=requests, p=p).astype(np.uint64) + 1
    sizes_of = rng.integers(20_000_000, 2_000_000_000, size=files + 1, dtype=np.uint64)
    size = sizes_of[ids]
    share = np.where(rng.random(requests) < 0.7, rng.uniform(0.1, 0.3, requests), 1.0)
    bytes_read = np.maximum(1, (size * share).astype(np.uint64))
    ts = 1_700_000_000 + np.arange(requests) // 20
    with open(path, "w") as f:
        f.write("timestamp,obj_id,obj_size,bytes_read\n")
        for chunk in range(0, requests, 100_000):
            sl = slice(chunk, chunk + 100_000)
            rows = np.stack([ts[sl].astype(np.uint64), ids[sl], size[sl], bytes_read[sl]], axis=1)
            np.savetxt(f, rows, fmt="%d", delimiter=",")


def run(trace: Path, size: str, params: list[str]) -> tuple[float, float, dict]:
    import resource

    cmd = [str(REPO / ".venv/bin/cachescope"), "simulate", str(trace), "--policy", "xcache", "--size", size,
           "--json", "--no-progress"] + [a for p in params for a in ("--param", p)]
    t0, u0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall, user = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - u0
    return wall, user, json.loads(out.splitlines()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--size", default="20TB")
    ap.add_argument("--rate", default="1Gbit/s", help="origin_rate of the 'on' variants")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace", type=Path, help="reuse this trace file instead of writing one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace or Path(tmp) / "trace.csv"
        if not args.trace:
            write_trace(trace, args.requests, args.files)
        variants = {"off": ["block_size=1MiB"],
                    "on": ["block_size=1MiB", f"origin_rate={args.rate}"],
                    "on+prefetch": ["block_size=1MiB", f"origin_rate={args.rate}", "prefetch=10"]}
        best = {name: [float("inf"), float("inf"), {}] for name in variants}
        for _ in range(args.repeat):  # alternating, as below
            for name, params in variants.items():
                seconds, cpu, answer = run(trace, args.size, params)
                b = best[name]
                b[0], b[1], b[2] = min(b[0], seconds), min(b[1], cpu), answer
        rows = []
        for name, (wall, cpu, answer) in best.items():
            rows.append({"variant": name, "seconds": round(wall, 3), "user_cpu_s": round(cpu, 3),
                         "requests_per_s": round(answer["requests"] / wall),
                         "hit_ratio": answer["hit_ratio"], "delayed_hits": answer["delayed_hits"],
                         "delayed_hit_ratio": answer["delayed_hit_ratio"], "byte_hit_ratio": answer["byte_hit_ratio"],
                         "bytes_filled": answer["bytes_filled"]})
        # the engine alone: the trace loaded once, each variant simulated in this process
        sys.path.insert(0, str(REPO))
        from cachescope.simulation import CacheSpec, load_trace, simulate
        from cachescope.units import parse_size
        from cachescope.xrdpfc import param_value

        loaded = load_trace(trace)
        specs = [CacheSpec("xcache", parse_size(args.size),
                           {k: param_value(k, v) for k, v in (p.split("=", 1) for p in params)})
                 for params in variants.values()]
        best = [float("inf")] * len(specs)
        simulate(loaded, [specs[0]])  # warm-up: page cache, allocator
        for _ in range(args.repeat):  # the variants alternate, so a busy moment hits them alike
            for i, spec in enumerate(specs):
                t0 = time.perf_counter()
                simulate(loaded, [spec])
                best[i] = min(best[i], time.perf_counter() - t0)
        for row, b in zip(rows, best):
            row["engine_s"] = round(b, 4)
            row["engine_requests_per_s"] = round(len(loaded) / b)
    for r in rows:
        print(json.dumps(r))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
