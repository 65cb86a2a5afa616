"""What-if with admission and partitions: today's code against an earlier revision's, side by side.

    .venv/bin/python scripts/bench_whatif.py --before 62ba1e6 [--rows 2000000] [--store var/bench-whatif]

Fills an embedded store once (N synthetic accesses over 7 days: zipf reuse, three servers, four
tiers, 2 % writes), then runs each case with `cachescope/replay.py` (once `whatif.py`) of `--before` (read from git,
run on this checkout's engine and read layer) and with this checkout's, alternately, `--repeat`
times each; prints the best end-to-end and engine seconds of each, and checks the answers are equal.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

START = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
DAYS = 7
SERVERS = ["xc1", "xc2", "xc3"]
TIERS = ["AOD", "MINIAOD", "USER", "RAW"]
GROUP = "BENCH-WHATIF"


def fill(store, rows: int) -> None:
    from cachescope.store import migrations, tables

    migrations.migrate(store, events_ttl_days=0)
    rng = np.random.default_rng(11)
    files = max(rows // 20, 1000)
    f = np.minimum(rng.zipf(1.2, rows) - 1, files - 1)
    size = (1 + (np.arange(files) * 7919) % 60) * 10**9
    ts = int(START.timestamp() * 10**6) + np.sort(rng.integers(0, DAYS * 86400 * 10**6, rows))
    server = rng.integers(0, 3, rows)
    tier = np.array(TIERS, dtype=object)[f % 4]
    for a in range(0, rows, 1 << 20):
        s = slice(a, min(a + (1 << 20), rows))
        n = s.stop - s.start
        store.insert(tables.ACCESS_EVENTS, {
            "ts": ts[s].astype("datetime64[us]"), "site": ["SITE-B"] * n, "source": ["xrootd"] * n,
            "server": np.array(SERVERS, dtype=object)[server[s]].tolist(), "client": [""] * n, "vo": ["cms"] * n,
            "path": [""] * n, "file_id": (1 + f[s]).astype(np.uint64), "file_size": size[f[s]].astype(np.uint64),
            "bytes_read": size[f[s]].astype(np.uint64),
            "op": np.where(rng.random(n) < 0.02, 1, 0).astype(np.uint8), "tier": tier[s].tolist(),
            "cache_group": [GROUP] * n, "origin": ["bench"] * n, "seq": np.arange(s.start, s.stop, dtype=np.uint64)})


def _module(name: str, src: str):
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _show(rev: str, path: str) -> str | None:
    got = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], capture_output=True, text=True)
    return got.stdout if got.returncode == 0 else None


def load_before(rev: str):
    """`rev`'s what-if module, with `rev`'s admission module (its Python sampling went since)."""
    src = _show(rev, "cachescope/replay.py") or _show(rev, "cachescope/whatif.py")  # whatif.py until session 15
    if src is None:
        sys.exit(f"{rev} has neither cachescope/replay.py nor cachescope/whatif.py")
    _module("admission_before", _show(rev, "cachescope/admission.py"))
    return _module("whatif_before", src.replace("from cachescope.admission import", "from admission_before import"))


def cases(mod) -> dict:
    adm = mod.Admission(exclude_tiers=("USER",), max_file_size=40 * 10**9)
    six = (["lru", "arc", "s3fifo"], [10**13, 5 * 10**13])
    return {
        "admission, 6 caches": dict(policies=six[0], sizes=six[1], admission=adm),
        "admission + 3 servers, 6 caches": dict(policies=six[0], sizes=six[1], admission=adm, partition_by="server"),
        "admission + 3 servers + sampled 0.1 (4 replicas), 6 caches":
            dict(policies=six[0], sizes=six[1], admission=adm, partition_by="server", sample_rate=0.1),
        "admission + 3 servers, belady + lru": dict(policies=["belady", "lru"], sizes=[10**13], admission=adm,
                                                   partition_by="server"),
    }


def run(mod, store, kw: dict) -> tuple[float, float, list]:
    req = mod.WhatIf(start=START, end=START + dt.timedelta(days=DAYS), cache_groups=[GROUP], **kw)
    t0 = time.perf_counter()
    res = mod.run_whatif(store, req)
    return time.perf_counter() - t0, res.engine_seconds, res.answers()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="git revision whose what-if (cachescope/replay.py or whatif.py) is the reference")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--store", type=Path, default=REPO / "var" / "bench-whatif")
    args = ap.parse_args()
    from cachescope import replay as after
    from cachescope.store import EmbeddedStore

    before = load_before(args.before)
    fresh = not args.store.exists()
    store = EmbeddedStore(args.store, database="bench_whatif")
    if fresh:
        t0 = time.perf_counter()
        fill(store, args.rows)
        print(f"filled {args.rows:,} accesses in {time.perf_counter() - t0:.1f} s", flush=True)
    for (label, kw_before), kw_after in zip(cases(before).items(), cases(after).values()):
        best = {"before": (1e9, 1e9), "after": (1e9, 1e9)}
        answers = {}
        for _ in range(args.repeat):
            for name, mod, kw in (("before", before, kw_before), ("after", after, kw_after)):
                total, engine, answers[name] = run(mod, store, kw)
                best[name] = min(best[name], (total, engine))
        same = "equal answers" if answers["before"] == answers["after"] else "ANSWERS DIFFER"
        print(f"{label}: before {best['before'][0]:.2f} s (engine {best['before'][1]:.2f} s), after "
              f"{best['after'][0]:.2f} s (engine {best['after'][1]:.2f} s); {same}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
