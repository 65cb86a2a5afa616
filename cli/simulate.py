"""`cachescope simulate`: replay a CSV trace through shadow caches of any policies and sizes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from cli.app import app
from cachescope.errors import UsageError, UserError
from cachescope.units import SizeError, format_efficiency, format_size, parse_size_spec


def fail(message: str, code: int = 2) -> UserError:
    """Bad usage (exit 2) or bad data, the trace (exit 1): printed as one line by the command
    line's error handler."""
    return UsageError(message) if code == 2 else UserError(message)


#: hash partitions of one cache (as many as a cache group has Flink subtasks, at most)
MAX_PARTITIONS = 1024


def split_list(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def parse_params(items: list[str]) -> dict[str, float]:
    """`--param name=value`: numbers, or for xcache's parameters sizes and durations (`300MB`,
    `5m`); one line naming the parameter otherwise."""
    from cachescope.xrdpfc import XrdPfcError, param_value

    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise fail(f"--param {item!r} must look like name=value")
        try:
            params[key.strip()] = param_value(key.strip(), value.strip())
        except XrdPfcError as e:
            raise fail(f"--param {e}") from None
    return params


def xcache_setup(config_file: Optional[Path], seed_file: Optional[Path]) -> tuple[dict[str, float], list]:
    """The xcache parameters of a real cache's configuration file, and the files of its
    `xrdpfc_print -j` output (file_id, cached bytes, last access) as a warm start."""
    import os

    from cachescope.xrdpfc import XrdPfcError, read_config, read_seed

    params, files = {}, []
    try:
        if config_file is not None:
            params = read_config(config_file)
        if seed_file is not None:
            from cachescope.tiers import RulesError, TierClassifier

            try:
                rules = []
                if any(k.startswith("CACHESCOPE_") for k in os.environ):
                    from cachescope.config import load_config

                    rules = load_config(None).tiers.rules_files
                classifier = TierClassifier.load(rules)
            except (RulesError, OSError, ValueError) as e:
                raise fail(f"--xcache-seed: the tier rules (path normalisation): {e}") from None
            files = read_seed(seed_file, lambda path: classifier.path_tier(path)[0])
    except XrdPfcError as e:
        raise fail(str(e), 1) from None
    return params, files


@app.command()
def simulate(
    trace_path: Annotated[str, typer.Argument(metavar="TRACE", help="CSV trace (header timestamp,obj_id,obj_size[,tier,path][,bytes_read]); .zst ok; - for stdin")],
    policy: Annotated[list[str], typer.Option("--policy", "-p", help="policies, comma-separated: lru,arc,…")] = ["lru"],
    size: Annotated[list[str], typer.Option("--size", "-s", help="capacities, comma-separated: 10TB, 10TiB, bytes, or 5% of the working set")] = [],
    trace_format: Annotated[str, typer.Option("--format", help="trace format: csv, or oracle-general (libCacheSim's 24-byte binary records)")] = "csv",
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line per (policy, size)")] = False,
    mrc: Annotated[bool, typer.Option("--mrc", help="also print the exact LRU miss-ratio curve")] = False,
    mrc_points: Annotated[int, typer.Option(min=1, max=4096, help="capacities on the curve (log-spaced)")] = 64,
    sample_rate: Annotated[float, typer.Option(help="SHARDS spatial sampling rate, 0 < R ≤ 1 (1 = every file)")] = 1.0,
    partitions: Annotated[int, typer.Option(min=1, max=MAX_PARTITIONS, help="hash-partitioned sub-caches of capacity C/P")] = 1,
    param: Annotated[list[str], typer.Option("--param", help="policy parameter name=value (repeatable)")] = [],
    progress: Annotated[Optional[bool], typer.Option("--progress/--no-progress", help="progress bar (default: on a terminal)")] = None,
    xcache_config: Annotated[Optional[Path], typer.Option("--xcache-config", help="the real XCache's configuration file: its pfc.blocksize and pfc.diskusage lines become the xcache policy's parameters (--param overrides them; --size is the cache filesystem's size)")] = None,
    xcache_seed: Annotated[Optional[Path], typer.Option("--xcache-seed", help="xrdpfc_print -j output of the real XCache's .cinfo files: every xcache cache starts holding those files (warm start)")] = None,
) -> None:
    """Replay TRACE through every (policy, size) in one pass and report hit and transfer efficiency."""
    # numpy and simulation.py only when the whole trace is loaded (see `whole`): a third of the
    # start-up of a streamed run
    from cachescope.specs import (POLICIES, TRACE_FORMATS, CacheSpec, TraceError, check_specs, ratios,
                                  simulate_file, working_set as file_working_set)

    if trace_format not in TRACE_FORMATS:
        raise fail(f"--format {trace_format!r}: simulate reads {', '.join(TRACE_FORMATS)} traces (use `cachescope replay` for logs)")
    policies = [p.lower() for p in split_list(policy)]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise fail(f"unknown policy {', '.join(unknown)}; known: {', '.join(POLICIES)}")
    sizes = split_list(size)
    if not sizes and not mrc:
        raise fail("give at least one --size (e.g. --size 10TB,50TB) or --mrc")
    params = parse_params(param)
    xcache_params, seed_files = xcache_setup(xcache_config, xcache_seed)
    if (xcache_config or xcache_seed) and "xcache" not in policies:
        raise fail("--xcache-config and --xcache-seed are for the xcache policy: add --policy xcache")
    if not 0.0 < sample_rate <= 1.0:
        raise fail(f"--sample-rate {sample_rate:g}: must be above 0 and at most 1")
    if trace_path != "-" and not Path(trace_path).is_file():
        raise fail(f"{trace_path}: no such file (give a CSV trace, or - for stdin)")
    show = sys.stderr.isatty() if progress is None else progress
    # Streamed in the engine unless something needs the whole trace first: the curve, belady
    # (next-access times), or a % size of standard input (a file's working set is a first pass)
    shares = any(s.endswith("%") for s in sizes)
    whole = mrc or "belady" in policies or (shares and trace_path == "-")
    trace = None
    working_set = None
    if shares and not whole:
        try:
            for s in sizes:  # a bad size is bad usage, found before the trace is read
                parse_size_spec(s, 1)
        except SizeError as e:
            raise fail(str(e)) from None
        try:
            working_set, rows = file_working_set(trace_path, trace_format)
        except TraceError as e:
            raise fail(str(e), 1) from None
        if rows == 0:
            raise fail(f"{trace_path}: the trace has no requests", 1)
    if whole:
        from cachescope.simulation import load_trace

        try:
            trace = load_trace(trace_path, trace_format)
        except TraceError as e:
            raise fail(str(e), 1) from None
        if len(trace) == 0:
            raise fail(f"{trace_path}: the trace has no requests", 1)
        working_set = trace.working_set() if shares or mrc else None
    try:
        capacities = [(s, parse_size_spec(s, working_set)) for s in sizes]
    except SizeError as e:
        raise fail(str(e)) from None
    try:
        specs = [CacheSpec(p, cap, {**xcache_params, **params} if p == "xcache" else params, sample_rate, partitions)
                 for p in policies for _, cap in capacities]
        check_specs(specs)
    except ValueError as e:
        raise fail(str(e)) from None

    seeds = [(i, seed_files) for i, spec in enumerate(specs) if spec.policy == "xcache"] if seed_files else []
    results = []
    n_requests = len(trace) if trace is not None else 0
    if specs:
        try:
            if trace is None:
                totals, tier_names, n_requests = _with_progress(
                    show, f"{len(specs)} caches",
                    lambda tick: simulate_file(trace_path, specs, trace_format, on_progress=tick, seeds=seeds))
                if n_requests == 0:
                    raise fail(f"{trace_path}: the trace has no requests", 1)
            else:
                from cachescope.simulation import simulate as run

                tier_names = trace.tier_names
                totals = _with_progress(show, f"{len(specs)} caches",
                                        lambda tick: run(trace, specs, on_progress=tick, seeds=seeds), len(trace)).tolist()
        except TraceError as e:
            raise fail(str(e), 1) from None
        except ValueError as e:
            raise fail(str(e)) from None
        labels = [label for _ in policies for label, _ in capacities]
        for spec, label, per_tier in zip(specs, labels, totals):
            all_tiers = [sum(column) for column in zip(*per_tier)]
            row = {"policy": spec.policy, "size": label, "size_bytes": spec.capacity, **ratios(all_tiers)}
            if spec.sample_rate != 1.0 or spec.partitions != 1:
                row.update(sample_rate=spec.sample_rate, partitions=spec.partitions)
            row["by_tier"] = {
                name: ratios(per_tier[t]) for t, name in enumerate(tier_names) if per_tier[t][0]
            }
            results.append(row)

    curve_points = []
    if mrc:
        from cachescope.simulation import LruCurve, log_grid

        grid = log_grid(max(1, working_set // 10_000), max(1, working_set), mrc_points)
        curve = LruCurve(grid, max(1, len(trace.tier_names)), sample_rate)
        import numpy as np

        ops = np.zeros(len(trace), dtype=np.uint8)
        _with_progress(show, "LRU curve",
                       lambda tick: (curve.feed(trace.file_id, trace.file_size, trace.bytes_read, trace.tier, ops),
                                     tick and tick(len(trace))), len(trace))
        curve_points = curve.points(trace.tier_names)

    if as_json:
        # the standard json module: byte sums are exact ints and may pass 2^64 (orjson refuses those)
        import json

        lines = [json.dumps(row, separators=(",", ":")) for row in results]
        lines += [json.dumps({"curve": "lru", **point}, separators=(",", ":")) for point in curve_points]
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()
    else:
        _print_tables(results, curve_points, n_requests, working_set)


def _with_progress(show: bool, what: str, work, total: int | None = None):
    from cli._progress import with_progress

    return with_progress(show, f"simulating {what}", work, total)


def _print_tables(results: list[dict], curve: list[dict], n: int, working_set: int | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if results:
        t = Table(title=f"{n:,} requests" + (f", working set {format_size(working_set)}" if working_set else ""))
        for col in ("policy", "size", "hit efficiency", "transfer efficiency", "hits", "bytes hit", "evictions"):
            t.add_column(col, justify="left" if col in ("policy", "size") else "right")
        for r in results:
            t.add_row(r["policy"], format_size(r["size_bytes"]), format_efficiency(r["hit_ratio"]), format_efficiency(r["byte_hit_ratio"]),
                      f"{r['hits']:,}", format_size(r["bytes_hit"]), f"{r['evictions']:,}")
        console.print(t)
    if curve:
        t = Table(title="exact LRU miss-ratio curve")
        for col in ("capacity", "hit efficiency", "transfer efficiency"):
            t.add_column(col, justify="right")
        for p in curve:
            t.add_row(format_size(p["capacity_bytes"]), format_efficiency(p["hit_ratio"]), format_efficiency(p["byte_hit_ratio"]))
        console.print(t)
