#!/usr/bin/env python3
"""End-to-end throughput of the embedded replay: `cachescope replay --format xrootd-gstream` as a
whole process on generated XCache g-stream records (default 1,000,000 accesses over 7 days, the
default 24 shadow caches per cache group), into a fresh chDB store each run.

Prints per run: events/s (wall clock), CPU seconds per event (user + system of the replay process
and every process it waited for: os.wait4) split into the main process (shadow caches, chDB
inserts) and its parse processes (sampled from /proc), peak RSS. The machine is shared: compare code
versions side by side, interleaved in one invocation (`--code DIR` repeatable: a checkout whose
`cachescope` package is run; the compiled engine must be in DIR/cachescope/), and read the ratios.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_replay.py [--events 1000000] [--repeat 2]
        [--code /work/main --code .] [--data /tmp/cachescope-bench-replay] [--breakdown 300000]

`--breakdown LINES` first times the parts in one process on the first LINES lines (CPU per event:
parsing, the engine's 24 caches with totals only and with per-window cells, the LRU curve, the
whole processing core) for the last --code (older checkouts lack `feed_cells`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORMAT = "xrootd-gstream"


def workload(data: Path, events: int, days: int, code: Path) -> list[Path]:
    """The generated g-stream files (made once per --events/--days, then reused)."""
    out = data / f"gstream-{events}-{days}d"
    fmt_dir = out / FORMAT
    done = out / ".complete"
    if not done.exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        print(f"generating {events:,} accesses over {days} days into {out} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-c", _MAIN, "generate", "--out", str(out), "--format", FORMAT,
                        "--events", str(events), "--days", str(days)],
                       env=_env(code), check=True, stdout=subprocess.DEVNULL)
        done.touch()
    return sorted(p for p in fmt_dir.iterdir() if p.is_file())


_MAIN = "import sys; from cli import main; sys.argv[0] = 'cachescope'; sys.exit(main())"


def _env(code: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code)
    return env


def _sample_children(pid: int, seen: dict[int, float]) -> None:
    """CPU seconds of the replay's child processes (the parsers), read from /proc until they end:
    with the total, the main process's own share. On two free cores the wall time is about the
    larger of the two."""
    tick = os.sysconf("SC_CLK_TCK")
    while True:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            return  # the replay ended
        for k in kids:
            try:
                with open(f"/proc/{k}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                seen[k] = (int(fields[11]) + int(fields[12])) / tick
            except OSError:
                pass
        time.sleep(0.1)


_SUMMARY = re.compile(r"→ ([\d,]+) events")


def run_once(code: Path, files: list[Path], extra: list[str]) -> dict[str, float]:
    store = Path(tempfile.mkdtemp(prefix="bench-replay-store-"))
    try:
        cmd = [sys.executable, "-c", _MAIN, "replay", "--format", FORMAT, "--store", str(store), "--json", *extra,
               *map(str, files)]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=_env(code), cwd=str(code), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        child_cpu: dict[int, float] = {}
        reader = threading.Thread(target=_sample_children, args=(proc.pid, child_cpu), daemon=True)
        reader.start()
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        reader.join()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"replay with {code} failed (exit {proc.returncode}): {stderr.strip()[-2000:]}")
        m = _SUMMARY.search(stderr)
        if m is None:
            raise SystemExit(f"replay with {code}: no summary line in its output: {stderr.strip()[-2000:]}")
        events = int(m.group(1).replace(",", ""))
        cpu = usage.ru_utime + usage.ru_stime
        parse = sum(child_cpu.values())
        return {"events": events, "wall": wall, "cpu": cpu, "rss_mib": usage.ru_maxrss / 1024,
                "main_us": (cpu - parse) / events * 1e6, "parse_us": parse / events * 1e6,
                "events_per_s": events / wall, "cpu_us_per_event": cpu / events * 1e6}
    finally:
        shutil.rmtree(store, ignore_errors=True)


_ENGINE = r"""
import itertools, resource, sys, time
import numpy as np
from cachescope.config import CachescopeConfig
from cachescope.core.columns import EventColumns
from cachescope.core.processor import GroupProcessor
from cachescope.core.tier_codes import TierCodes
from cachescope.simulation import LruCurve, ShadowBank
from ingest.pipeline import LineParser

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

path, lines = sys.argv[1], int(sys.argv[2])
cfg = CachescopeConfig()
parser = LineParser("xrootd-gstream", config=cfg, source_name=path)
with open(path) as f:
    t = cpu()
    ev = EventColumns.concat([EventColumns.from_events(b) for b in parser.batches(itertools.islice(f, lines), 16384)])
    print(f"parse (one process: decode, enrich, tiers, columns): {(cpu() - t) / len(ev) * 1e6:.2f} µs/event")
pc = cfg.pipeline
group = ev.take(np.flatnonzero(ev.cache_group == ev.cache_group[0]))
n = len(group)
tier = TierCodes(pc.n_tiers).encode(group.tier)
win = group.ts - group.ts % pc.windows.us("efficiency")
batch = 32768

def timed(name, feed):
    t = cpu()
    for a in range(0, n, batch):
        feed(slice(a, min(a + batch, n)))
    print(f"{name}: {(cpu() - t) / n * 1e6:.2f} µs/event")

bank = ShadowBank(pc.shadow.specs(), pc.n_tiers)
timed(f"engine, {len(bank.specs)} caches, totals only", lambda b: bank.feed_totals(
    group.file_id[b], group.file_size[b], group.bytes_read[b], tier[b], group.op[b]))
bank = ShadowBank(pc.shadow.specs(), pc.n_tiers)
timed("engine, per-window counter cells (feed_cells)", lambda b: bank.feed_cells(
    group.file_id[b], group.file_size[b], group.bytes_read[b], tier[b], group.op[b],
    (win[b] - win[b].min()) // pc.windows.us("efficiency"), tiers_used=int(tier.max()) + 1))
curve = LruCurve([int(c) for c in pc.curve.grid()], pc.n_tiers)
timed(f"LRU curve, {len(pc.curve.grid())} points", lambda b: curve.feed(
    group.file_id[b], group.file_size[b], group.bytes_read[b], tier[b], group.op[b]))
proc = GroupProcessor(str(group.cache_group[0]), pc)
t = cpu()
for a in range(0, n, batch):
    proc.process(group.slice(a, min(a + batch, n)))
proc.flush()
print(f"processing core (engine, curve, windows, rows): {(cpu() - t) / n * 1e6:.2f} µs/event ({n:,} events of one group)")
"""


def engine_breakdown(code: Path, files: list[Path], lines: int) -> None:
    """CPU per event of the parts, one process (no chDB): parse, engine, curve, processing core."""
    print(f"breakdown of {code} on the first {lines:,} lines (CPU per event, this process only):", flush=True)
    subprocess.run([sys.executable, "-c", _ENGINE, str(files[0]), str(lines)], env=_env(code), check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="accesses generated")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=1, help="runs per code version (interleaved)")
    ap.add_argument("--code", action="append", type=Path,
                    help="checkout to run (repeatable, compared side by side); default: this one")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "cachescope-bench-replay",
                    help="where the generated workload is kept between runs")
    ap.add_argument("--replay-arg", action="append", default=[], help="extra argument to `cachescope replay`")
    ap.add_argument("--breakdown", type=int, default=0, metavar="LINES",
                    help="also time the parts (parse, engine, curve, processing core) on the first LINES lines")
    args = ap.parse_args()
    codes = [c.resolve() for c in (args.code or [ROOT])]
    for c in codes:
        if not list((c / "cachescope").glob("_simcore*.so")):
            raise SystemExit(f"{c}/cachescope/ has no compiled engine (_simcore*.so): copy it there or build it")
    files = workload(args.data, args.events, args.days, codes[-1])
    size = sum(f.stat().st_size for f in files)
    print(f"workload: {len(files)} file(s), {size / 2**20:,.0f} MiB, {args.events:,} generated accesses "
          f"over {args.days} days; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.breakdown:
        engine_breakdown(codes[-1], files, args.breakdown)
    results: dict[Path, list[dict[str, float]]] = {c: [] for c in codes}
    for r in range(args.repeat):
        for c in codes:
            res = run_once(c, files, args.replay_arg)
            results[c].append(res)
            print(f"run {r + 1} {c}: {res['events']:,} events, {res['wall']:.1f} s wall, "
                  f"{res['events_per_s']:,.0f} events/s, {res['cpu_us_per_event']:.1f} µs CPU/event "
                  f"({res['cpu']:.1f} s CPU: main process {res['main_us']:.1f} µs/event, parse processes "
                  f"{res['parse_us']:.1f}), peak RSS {res['rss_mib']:,.0f} MiB", flush=True)
    if not args.repeat:
        return 0
    print("best per code version (wall: events/s; CPU: µs per event):")
    base = None
    for c in codes:
        best_rate = max(x["events_per_s"] for x in results[c])
        best_cpu = min(x["cpu_us_per_event"] for x in results[c])
        rss = max(x["rss_mib"] for x in results[c])
        ratio = "" if base is None else (f"  ×{best_rate / base[0]:.2f} events/s, "
                                         f"×{base[1] / best_cpu:.2f} less CPU per event")
        print(f"  {c}: {best_rate:,.0f} events/s, {best_cpu:.1f} µs CPU/event, peak RSS {rss:,.0f} MiB{ratio}")
        if base is None:
            base = (best_rate, best_cpu)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
