#!/usr/bin/env python3
"""dCache billing parsing in one process, side by side: the compiled block path
(simcore/src/billing.rs) against the template regexes (the Python reference), on the same
generated log held in memory; then through LineParser (parse + enrichment, what a shipper and
`cachescope parse` run) given a list, given an iterator (a file), and with the compiled path off.
CPU time (process_time), best of --repeat, the variants interleaved so machine load hits them
alike; fresh parse state each run.

    .venv/bin/python scripts/bench_billing_parse.py [--events 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from cachescope.config import load_config  # noqa: E402
from cachescope.tiers import TierClassifier  # noqa: E402
from ingest.formats import ParseContext  # noqa: E402
from ingest.formats import dcache_billing as billing  # noqa: E402
from ingest.generate import make_workload, render  # noqa: E402
from ingest.pipeline import LineParser  # noqa: E402


def _ctx() -> ParseContext:
    ctx = ParseContext(site="S", year=2024)
    billing.prepare(ctx)
    return ctx


def parse_compiled(lines: list[str]) -> None:
    ctx = _ctx()
    for k in range(0, len(lines), 8192):
        billing._block(lines[k:k + 8192], ctx)


def parse_templates(lines: list[str]) -> None:
    ctx = _ctx()
    for line in lines:
        try:
            billing._parse(line.rstrip("\r\n"), ctx)
        except billing.BadRecord:
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    w = make_workload(args.events, days=1, sites=1, servers=4, seed=1)
    lines = [line + "\n" for _, _, _, line in render("dcache-billing", w)]
    config = load_config()
    classifier = TierClassifier.load(config.tiers.rules_files)

    reference = dataclasses.replace(billing.FORMAT, block=None)

    def pipeline(fmt, as_list: bool):
        def run(lines: list[str]) -> None:
            p = LineParser(fmt, config=config, site="S", year=2024, classifier=classifier, record_skipped=False)
            for _ in p.batches(lines if as_list else iter(lines)):
                pass
        return run

    variants = {
        "parse: compiled block": parse_compiled,
        "parse: templates (reference)": parse_templates,
        "parse + enrich (LineParser), list": pipeline("dcache-billing", True),
        "parse + enrich (LineParser), iterator": pipeline("dcache-billing", False),
        "parse + enrich (LineParser), templates": pipeline(reference, True),
    }
    best = {name: float("inf") for name in variants}
    load = os.getloadavg()[0]
    for _ in range(args.repeat):
        for name, fn in variants.items():
            t0 = time.process_time()
            fn(lines)
            best[name] = min(best[name], time.process_time() - t0)
    print(f"dcache-billing parse, {len(lines):,} lines ({args.events:,} accesses), CPU time, best of {args.repeat}, "
          f"load {load:.1f} → {os.getloadavg()[0]:.1f}")
    for name, t in best.items():
        print(f"  {name:40s} {t / len(lines) * 1e6:6.2f} µs/line  {len(lines) / t:>10,.0f} lines/s of CPU")
    print(f"  compiled / templates, parse only: {best['parse: templates (reference)'] / best['parse: compiled block']:.2f}x; "
          f"with enrichment: {best['parse + enrich (LineParser), templates'] / best['parse + enrich (LineParser), list']:.2f}x")


if __name__ == "__main__":
    main()
