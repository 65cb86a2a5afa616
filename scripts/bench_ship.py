"""`cachescope ship` file → Kafka, exactly once, on dCache billing text (target ≥ 100k lines/s).

Starts this checkout's Kafka (`scripts/services start kafka`) unless one runs already, generates
a dCache billing log (`cachescope generate`: transfers plus the door requests and failed
transfers a real billing log holds), ships it whole (`--no-follow`) into a fresh topic as one
process, and prints lines/s, events/s, CPU time and peak RSS of that process (from wait4). Stops
Kafka afterwards if it started it (`scripts/services stop kafka`).

Run: .venv/bin/python scripts/bench_ship.py [--events 300000] [--repeat 2] [--compare DIR]

--compare DIR also ships the same log with another checkout's code (e.g. /work/main: before a
change), alternating with this one's, into the same Kafka: before/after in one run, as a ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from bench_startup import run_once

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "cachescope")
SERVICES = str(REPO / "scripts" / "services")


def kafka_env() -> dict[str, str] | None:
    p = subprocess.run([SERVICES, "env", "kafka"], capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        return None
    return dict(line.split("=", 1) for line in p.stdout.split() if "=" in line)


def ship_once(log: Path, bootstrap: str, state: Path, code: Path = REPO) -> tuple[float, float, int]:
    topic = f"bench-ship-{uuid.uuid4().hex[:8]}"
    cmd = [EXE, "ship", "--format", "dcache-billing", "--from", str(log), "--to", f"kafka://{bootstrap}/{topic}",
           "--state", str(state), "--shipper-id", topic, "--no-follow"]
    env = {**os.environ, "PYTHONPATH": str(code)}  # which checkout's code the venv's command runs
    return run_once(cmd, env, state.with_suffix(".stderr"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=300_000, help="accesses to generate (the log has more lines)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--compare", type=Path, help="another checkout to measure alternately (before/after)")
    args = ap.parse_args()
    if args.compare is not None and not (args.compare / "ingest" / "shipper.py").is_file():
        raise SystemExit(f"--compare {args.compare}: not a cachescope checkout (no ingest/shipper.py)")
    env = kafka_env()
    started = env is None
    if started:
        subprocess.run([SERVICES, "start", "kafka"], check=True)
        env = kafka_env()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "billing"
            subprocess.run([EXE, "generate", "--out", str(out), "--format", "dcache-billing", "--events",
                            str(args.events), "--sites", "1", "--days", "1"], check=True, capture_output=True)
            log = next(p for p in sorted(out.rglob("*")) if p.is_file())
            lines = sum(1 for line in log.open("rb") if line.strip())
            codes = {"this checkout": REPO, **({str(args.compare): args.compare} if args.compare else {})}
            runs: dict[str, list] = {name: [] for name in codes}
            load = os.getloadavg()[0]
            for i in range(args.repeat):
                for name, code in codes.items():
                    state = Path(tmp) / f"state-{i}-{list(codes).index(name)}.json"
                    runs[name].append(ship_once(log, env["KAFKA_BOOTSTRAP"], state, code))
            print(f"ship dcache-billing → Kafka, exactly once: {lines:,} lines ({log.name}), best of {args.repeat}, "
                  f"load {load:.1f} → {os.getloadavg()[0]:.1f}")
            best = {name: min(r) for name, r in runs.items()}
            for name, (wall, cpu, rss) in best.items():
                print(f"  {name}: {lines / wall:,.0f} lines/s wall ({wall:.2f} s), {lines / cpu:,.0f} lines/s of CPU "
                      f"({cpu:.2f} s), peak RSS {rss / 1024:.0f} MiB   (target ≥ 100,000 lines/s)")
            if args.compare:
                (w1, c1, _), (w0, c0, _) = best.values()
                print(f"  this / {args.compare}: {w0 / w1:.2f}x wall, {c0 / c1:.2f}x CPU")
    finally:
        if started:
            subprocess.run([SERVICES, "stop", "kafka"], check=False)


if __name__ == "__main__":
    main()
