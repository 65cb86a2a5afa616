#!/usr/bin/env python3
"""The `xcache` model against a real XCache run (a capture of shared/xcache-lab/, or any directory
laid out the same way): the model configured from the cache's own configuration file, replayed
over the run's client reads, compared with what the real cache did.

    scripts/xcache_model_check.py ../shared/xcache-lab/captures/run1-default [more runs] [--json]

Per run: the real cache's hit ratio (g-stream `file_close` records with nothing fetched from the
origin: `remotes` empty) and the model's (reads entirely served from its cache), and each purge's
removed bytes, real (`purges.jsonl`, from the cache's log) beside the model's (its purge log), in
order. Needs in each directory: cache.cfg, settings.txt (LAB_CACHE_FS_MB: the cache filesystem's
size in MiB), workload.sim.csv.gz (the client reads as a simulator trace, times in seconds),
gstream.jsonl and purges.jsonl.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def fs_size(run: Path) -> int:
    """The cache filesystem's size (the tmpfs the lab mounts), bytes."""
    m = re.search(r"LAB_CACHE_FS_MB=(\d+)", (run / "settings.txt").read_text())
    if not m:
        raise ValueError(f"{run}/settings.txt has no LAB_CACHE_FS_MB (the cache filesystem's size)")
    return int(m.group(1)) << 20


def clamped(path: Path) -> Path:
    """The trace with bytes_read clamped to the file size (a client that reads part of a file twice
    reads more than its size; the lab's traces do not always cap it), in a temporary file."""
    import csv
    import gzip
    import tempfile

    out = Path(tempfile.mkdtemp(prefix="xcache-check-")) / "trace.csv"
    with gzip.open(path, "rt", newline="") as src, out.open("w", newline="") as dst:
        rows = csv.DictReader(src)
        w = csv.DictWriter(dst, rows.fieldnames)
        w.writeheader()
        for r in rows:
            r["bytes_read"] = str(min(int(r["bytes_read"]), int(r["obj_size"])))
            w.writerow(r)
    return out


def real_hits(run: Path) -> tuple[int, int]:
    """(records with nothing fetched from the origin, file_close records) of the g-stream."""
    hits = records = 0
    for line in (run / "gstream.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("event") == "file_close":
            records += 1
            hits += r.get("remotes") == []
    return hits, records


def check(run: str | Path) -> dict:
    """The comparison for one run directory, as a dict (see the module doc)."""
    from cachescope.simulation import CacheSpec, ShadowBank, load_trace
    from cachescope.specs import F
    from cachescope.xrdpfc import read_config

    run = Path(run)
    params = read_config(run / "cache.cfg")
    size = fs_size(run)
    trace = load_trace(clamped(run / "workload.sim.csv.gz"))
    bank = ShadowBank([CacheSpec("xcache", size, params)], max(1, len(trace.tier_names)))
    import numpy as np

    bank.feed_totals(trace.file_id, trace.file_size, trace.bytes_read, trace.tier,
                     np.zeros(len(trace), np.uint8), clock=trace.timestamp)
    totals = bank.totals()[0].sum(axis=0)
    hits, records = real_hits(run)
    real_purges = [json.loads(line) for line in (run / "purges.jsonl").read_text().splitlines() if line.strip()]
    model_purges = bank.purge_log(0)[0]
    purges = []
    for i in range(max(len(real_purges), len(model_purges))):
        r = real_purges[i] if i < len(real_purges) else {}
        m = model_purges[i] if i < len(model_purges) else {}
        purges.append({
            "real_removed_bytes": r.get("removed_bytes"), "model_removed_bytes": m.get("removed_bytes"),
            "real_used": r.get("used_disk"), "model_used": m.get("disk_usage"),
            "real_protected": r.get("protected"), "model_protected": m.get("protected_files"),
        })
    return {
        "run": run.name,
        "size_bytes": size,
        "params": params,
        "real_hit_ratio": hits / records if records else 0.0,
        "real_records": records,
        "model_hit_ratio": int(totals[F["hits"]]) / int(totals[F["requests"]]) if totals[F["requests"]] else 0.0,
        "model_requests": int(totals[F["requests"]]),
        "purges": purges,
    }


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a captured run (shared/xcache-lab/captures/NAME)")
    ap.add_argument("--json", action="store_true", help="one JSON object per run")
    args = ap.parse_args(argv)
    as_json, runs = args.json, args.runs
    for run in runs:
        try:
            out = check(run)
        except (OSError, ValueError) as e:
            print(f"xcache_model_check: {run}: {e}", file=sys.stderr)
            return 1
        if as_json:
            print(json.dumps(out))
            continue
        print(f"{out['run']}: real hit ratio {out['real_hit_ratio']:.3f} ({out['real_records']} records), "
              f"model {out['model_hit_ratio']:.3f} ({out['model_requests']} reads)")
        for i, p in enumerate(out["purges"]):
            print(f"  purge {i}: removed real {p['real_removed_bytes']} model {p['model_removed_bytes']}; "
                  f"used real {p['real_used']} model {p['model_used']}; "
                  f"protected real {p['real_protected']} model {p['model_protected']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
