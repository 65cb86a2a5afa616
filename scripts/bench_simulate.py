"""`cachescope simulate` whole process against libCacheSim on the same trace and caches.

The trace is the engine benchmark's (cachescope/bench/workload.py: 5M requests, Zipf 0.9 over
200k files, log-normal sizes, here clipped below 4 GB so that libCacheSim's 32-bit object sizes
hold them exactly), written once under var/bench/ as CSV.zst (ours) and as oracleGeneral.zst
(libCacheSim's binary format, which `simulate --format oracle-general` also reads).

libCacheSim: PyPI's `libcachesim` 0.3.5 ships no `cachesim` binary, only Python bindings whose
`process_trace` runs libCacheSim's C simulation loop over its own C trace reader; each run here is
a whole `python -c` process around it (its interpreter and import time are reported apart).
cachesim's `--num-thread=2` over 24 caches is modelled by two such processes of 12 caches each.

Every figure is the best of --repeat whole-process wall-clock runs, with CPU time and peak RSS
of that process (from wait4). Run: .venv/bin/python scripts/bench_simulate.py [--repeat 3]
(needs `pip install -e .[bench]`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "cachescope")
OUT = REPO / "var" / "bench"


def write_traces(requests: int) -> tuple[Path, Path, int]:
    import numpy as np
    import zstandard

    from cachescope import _simcore
    from cachescope.bench.workload import zipf_trace

    csv = OUT / f"zipf{requests}.csv.zst"
    og = OUT / f"zipf{requests}.oracleGeneral.zst"
    trace = zipf_trace(requests, max_size=4_000_000_000)
    ws = trace.working_set()
    if csv.exists() and og.exists():
        return csv, og, ws
    OUT.mkdir(parents=True, exist_ok=True)
    ts = np.arange(len(trace), dtype=np.uint64)
    body = "\n".join(f"{t},{i},{s}" for t, i, s in zip(ts.tolist(), trace.file_id.tolist(), trace.file_size.tolist()))
    data = ("timestamp,obj_id,obj_size\n" + body + "\n").encode()
    csv.write_bytes(zstandard.ZstdCompressor(level=3, threads=2).compress(data))
    rec = np.zeros(len(trace), dtype=[("ts", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    nxt = _simcore.next_access_times(trace.file_id).astype(np.int64)  # u64::MAX (none) becomes -1
    rec["ts"], rec["id"], rec["size"], rec["next"] = ts, trace.file_id, trace.file_size, nxt
    og.write_bytes(zstandard.ZstdCompressor(level=3, threads=2).compress(rec.tobytes()))
    return csv, og, ws


LCS_CLASSES = {"lru": "LRU", "arc": "ARC", "s3fifo": "S3FIFO", "fifo": "FIFO"}


def lcs_cmd(trace: Path, caches: list[tuple[str, int]]) -> list[str]:
    code = (
        "import sys, libcachesim as l\n"
        f"for name, size in {caches!r}:\n"
        f"    r = l.TraceReader({str(trace)!r}, l.TraceType.ORACLE_GENERAL_TRACE)\n"
        "    c = getattr(l, name)(cache_size=size)\n"
        "    print(name, size, *c.process_trace(r))\n"
    )
    return [sys.executable, "-c", code]


def run(cmds: list[list[str]]) -> tuple[float, float, int]:
    """Start the commands together; (wall s until the last ends, CPU s of all, max peak RSS KiB).

    Each runs under /usr/bin/time, whose own footprint is tiny: a child's ru_maxrss taken by
    this (large) process would include this process's high-water mark (exec keeps it)."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen(["/usr/bin/time", "-f", "%M %U %S", *c], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for c in cmds]
    cpu, rss = 0.0, 0
    for p, c in zip(procs, cmds):
        err = p.communicate()[1]
        if p.returncode != 0:
            raise SystemExit(f"failed: {' '.join(c)[:200]}: {err[-500:]}")
        m, u, s_ = err.strip().splitlines()[-1].split()
        cpu += float(u) + float(s_)
        rss = max(rss, int(m))
    return time.perf_counter() - t0, cpu, rss


def best(cmds: list[list[str]], repeat: int) -> tuple[float, float, int]:
    return min(run(cmds) for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    csv, og, ws = write_traces(args.requests)
    cap = ws // 10
    from cachescope.bench.engine import bank_grid

    sizes = bank_grid(ws)
    print(f"trace: {args.requests:,} requests, working set {ws:,} bytes; {csv.name} {csv.stat().st_size >> 20} MiB, "
          f"{og.name} {og.stat().st_size >> 20} MiB; best of {args.repeat}, load {os.getloadavg()[0]:.1f}")
    floor = best([[sys.executable, "-c", "import libcachesim"]], args.repeat)
    print(f"python + import libcachesim alone: {floor[0]:.3f} s wall, {floor[2] / 1024:.0f} MiB", flush=True)
    ours_floor = best([[EXE, "--help"]], args.repeat)
    print(f"cachescope --help alone: {ours_floor[0]:.3f} s wall, {ours_floor[2] / 1024:.0f} MiB", flush=True)
    rows = []
    for policy in ("lru", "arc", "s3fifo"):
        ours_csv = best([[EXE, "simulate", str(csv), "--policy", policy, "--size", str(cap), "--json"]], args.repeat)
        ours_og = best([[EXE, "simulate", str(og), "--format", "oracle-general", "--policy", policy,
                         "--size", str(cap), "--json"]], args.repeat)
        lcs = best([lcs_cmd(og, [(LCS_CLASSES[policy], cap)])], args.repeat)
        rows.append((f"{policy}, 10% of WSS", ours_csv, ours_og, lcs))
    caches = [(LCS_CLASSES[p], s) for p in ("lru", "arc", "s3fifo") for s in sizes]
    ours_csv = best([[EXE, "simulate", str(csv), "--policy", "lru,arc,s3fifo", "--size", ",".join(map(str, sizes)),
                      "--json"]], args.repeat)
    ours_og = best([[EXE, "simulate", str(og), "--format", "oracle-general", "--policy", "lru,arc,s3fifo",
                     "--size", ",".join(map(str, sizes)), "--json"]], args.repeat)
    lcs = best([lcs_cmd(og, caches[0::2]), lcs_cmd(og, caches[1::2])], 1)
    rows.append(("24 caches (3 × 8 sizes)", ours_csv, ours_og, lcs))
    head = (f"{'what':26} {'ours CSV.zst s':>14} {'ours OG.zst s':>13} {'libCacheSim s':>13} "
            f"{'ratio CSV':>9} {'ratio OG':>8} {'RSS MiB ours/ours-OG/lcs':>26}")
    print(head)
    for name, a, b, c in rows:
        print(f"{name:26} {a[0]:14.3f} {b[0]:13.3f} {c[0]:13.3f} {c[0] / a[0]:9.2f} {c[0] / b[0]:8.2f} "
              f"{a[2] / 1024:10.0f}/{b[2] / 1024:.0f}/{c[2] / 1024:.0f}")
        print(f"{'  CPU s':26} {a[1]:14.3f} {b[1]:13.3f} {c[1]:13.3f} {c[1] / a[1]:9.2f} {c[1] / b[1]:8.2f}", flush=True)
    print("ratio = libCacheSim time / ours (higher is faster); libCacheSim for 24 caches: 2 processes × 12 caches; "
          f"load at the end {os.getloadavg()[0]:.1f} (on a shared machine compare the CPU ratios)")


if __name__ == "__main__":
    main()
