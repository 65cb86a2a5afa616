#!/usr/bin/env python3
"""Ingest throughput per format on one core: lines/s through parse + enrichment (AccessEvent
objects), and through parse + enrichment + JSON encoding (what `cachescope parse` does).

Input: `cachescope generate` output held in memory (the real formats, with their noise lines:
dCache door requests, g-stream packet headers, failed transfers ...), so the number is lines of
log per second, not events. Time is the process's CPU time (the machine is shared: wall time
counts other jobs), best of --repeat runs; each run starts with cold caches (a new parser).

    .venv/bin/python scripts/bench_ingest.py [--events 200000] [--format F ...] [--repeat 3] [--columns]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from cachescope.config import load_config  # noqa: E402
from cachescope.core.columns import EventColumns  # noqa: E402
from cachescope.events import encode_lines  # noqa: E402
from cachescope.tiers import TierClassifier  # noqa: E402
from ingest.generate import RENDERERS, make_workload, render  # noqa: E402
from ingest.pipeline import LineParser  # noqa: E402


def one_run(fmt: str, lines: list[str], site: str, encode: bool, classifier: TierClassifier, config,
            columns: bool = False) -> tuple[float, int]:
    parser = LineParser(fmt, config=config, site=site, year=2024, classifier=classifier, on_reject=lambda r: None)
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        n = 0
        if columns:  # the replay's parse: EventColumns (the compiled decoder where the format has one)
            n = sum(len(c) for c in parser.column_batches(lines))
        for batch in () if columns else parser.batches(lines):
            n += len(batch)
            if encode:
                encode_lines(batch)
        dt = time.process_time() - t0
    finally:
        gc.enable()
    if parser.stats.internal_errors:
        raise SystemExit(f"{fmt}: {parser.stats.internal_errors} internal errors")
    return dt, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000, help="accesses generated (lines are more for some formats)")
    ap.add_argument("--format", action="append", choices=list(RENDERERS), help="repeatable; default: all")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--columns", action="store_true", help="time the replay's parse (column_batches) instead")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    w = make_workload(args.events, days=7, sites=2, servers=4, seed=args.seed)
    config = load_config()
    classifier = TierClassifier()
    print(f"# {args.events} generated accesses (seed {args.seed}), 2 sites x 4 servers, 7 days; one core; best of {args.repeat}")
    print(f"{'format':18} {'lines':>9} {'events':>9} {'lines/s parse':>14} {'lines/s +json':>14} {'MB/s':>7}")
    for fmt in args.format or list(RENDERERS):
        rendered = render(fmt, w)
        lines = [line for _, _, _, line in rendered]
        if fmt == "csv":
            lines.insert(0, "timestamp,obj_id,obj_size,tier,path,bytes_read")
        site = w.sites[0] if fmt in ("dcache-billing", "eos-report", "http-access", "csv") else ""
        mb = sum(len(x) + 1 for x in lines) / 1e6
        best_parse = min(one_run(fmt, lines, site, False, classifier, config, args.columns)[0]
                         for _ in range(args.repeat))
        runs = [one_run(fmt, lines, site, not args.columns, classifier, config, args.columns)
                for _ in range(args.repeat)]
        best_json = min(r[0] for r in runs)
        n_events = runs[0][1]
        print(f"{fmt:18} {len(lines):9d} {n_events:9d} {len(lines) / best_parse:14,.0f} {len(lines) / best_json:14,.0f} "
              f"{mb / best_json:7.1f}")
    # the processing core's view: events -> numpy columns
    events = LineParser("csv", config=config, classifier=classifier, on_reject=lambda r: None).parse_all(
        ["timestamp,obj_id,obj_size,tier,path,bytes_read"] + [line for _, _, _, line in render("csv", w)])
    best = min(_time(lambda: EventColumns.from_events(events)) for _ in range(args.repeat))
    print(f"# EventColumns.from_events: {len(events) / best:,.0f} events/s ({len(events)} events)")
    return 0


def _time(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


if __name__ == "__main__":
    raise SystemExit(main())
