"""Whole-process start-up of `cachescope --help` and `cachescope tier PATH` (target ≤ 0.15 s), and
of `cachescope simulate` on a three-line trace (what every run of a sweep pays before the engine).

Prints, per command, the best wall-clock time of N runs, the CPU time (user + system) of the
best run, and peak RSS. Run: .venv/bin/python scripts/bench_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXE = str(Path(sys.executable).parent / "cachescope")
COMMANDS = {
    "cachescope --help": [EXE, "--help"],
    "cachescope tier PATH": [EXE, "tier", "/store/mc/Run3Summer22/TTto2L2Nu/AODSIM/124X_v1/2550000/a.root"],
    "cachescope simulate TINY": [EXE, "simulate", "TINY", "--policy", "lru,arc,s3fifo", "--size", "100,200", "--json"],
    "python -c pass (floor)": [sys.executable, "-c", "pass"],
}


def run_once(cmd: list[str], env: dict[str, str] | None = None, stderr: Path | None = None) -> tuple[float, float, int]:
    """(wall s, cpu s, peak RSS KiB) of one child process; its output is dropped, but for its
    stderr written to `stderr` when given (and shown if it fails). Also used by bench_ship."""
    actions = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
    if stderr is not None:
        actions.append((os.POSIX_SPAWN_OPEN, 2, str(stderr), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    t0 = time.perf_counter()
    pid = os.posix_spawn(cmd[0], cmd, os.environ if env is None else env, file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        detail = f": {stderr.read_text().strip()}" if stderr is not None else ""
        raise SystemExit(f"{' '.join(cmd)} failed{detail}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    tiny = Path(tempfile.mkdtemp()) / "tiny.csv"
    tiny.write_text("timestamp,obj_id,obj_size\n1,1,100\n2,2,100\n3,1,100\n")
    for cmd in COMMANDS.values():
        cmd[:] = [str(tiny) if a == "TINY" else a for a in cmd]
    print(f"{'command':28} {'best wall s':>11} {'cpu s':>7} {'peak RSS MiB':>13}  (best of {args.runs}; target ≤ 0.15 s)")
    for name, cmd in COMMANDS.items():
        runs = [run_once(cmd) for _ in range(args.runs)]
        wall, cpu, rss = min(runs)
        print(f"{name:28} {wall:11.3f} {cpu:7.3f} {max(r[2] for r in runs) / 1024:13.1f}")
    load = os.getloadavg()[0]
    tiny.unlink()
    tiny.parent.rmdir()
    print(f"load average {load:.1f} on {os.cpu_count()} cores (figures above are disturbed when it exceeds the cores)")


if __name__ == "__main__":
    main()
