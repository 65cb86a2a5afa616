"""`cachescope bench …`: the benchmarks behind BENCHMARKS.md (figures printed, never asserted)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from cli.app import app

bench_app = typer.Typer(help="Benchmarks for the performance targets in DESIGN.md.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

TARGETS = {"lru": 5e6, "arc": 3.5e6, "s3fifo": 2e6}


@bench_app.command("engine")
def engine(
    requests: Annotated[int, typer.Option(min=1000, max=500_000_000, help="requests in the generated Zipf trace")] = 5_000_000,
    files: Annotated[int, typer.Option(min=10, max=100_000_000, help="distinct files")] = 200_000,
    alpha: Annotated[float, typer.Option(min=0.0, max=5.0, help="Zipf exponent")] = 0.9,
    policies: Annotated[str, typer.Option(help="policies to time alone (comma-separated; default all)")] = "",
    bank_policies: Annotated[str, typer.Option(help="policies of the bank (× 8 sizes)")] = "lru,arc,s3fifo",
    repeat: Annotated[int, typer.Option(min=1, max=100, help="runs per figure; the best is reported")] = 3,
    compare: Annotated[str, typer.Option(help="another build's _simcore*.so: time each policy in both, interleaved, and print ratios")] = "",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Single-policy requests/s, bank (3 policies × 8 sizes) events/s, exact LRU curve (64 sizes) events/s."""
    import platform

    import orjson

    from cachescope.bench.engine import bank_grid, bank_rate, curve_rate, default_policies, policy_rates
    from cachescope.bench.workload import zipf_trace
    from cachescope.simulation import POLICIES, log_grid

    from cachescope.errors import UsageError

    unknown = [p for p in (policies + "," + bank_policies).split(",") if p and p not in POLICIES]
    if unknown:
        raise UsageError(f"unknown policies {', '.join(unknown)}; known: {', '.join(POLICIES)}")
    t0 = time.perf_counter()
    trace = zipf_trace(requests, files, alpha)
    ws = trace.working_set()
    chosen = [p for p in policies.split(",") if p] or default_policies()
    if compare:
        _compare(trace, chosen, ws // 10, compare, repeat, as_json, requests, files, alpha)
        return
    bank_pols = [p for p in bank_policies.split(",") if p in POLICIES]
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {platform.processor() or ''} cores={_cores()}".strip(),
        "trace": {"requests": requests, "files": files, "alpha": alpha, "working_set_bytes": ws,
                  "generated_in_s": round(time.perf_counter() - t0, 2)},
        "capacity_bytes": ws // 10,
        "policies_req_per_s": policy_rates(trace, chosen, ws // 10, repeat),
        "bank": {"policies": bank_pols, "sizes": bank_grid(ws),
                 "events_per_s": bank_rate(trace, bank_pols, bank_grid(ws), repeat)},
        "lru_curve": {"points": 64, "events_per_s": curve_rate(trace, log_grid(ws // 10_000, ws, 64), repeat)},
        "peak_rss_mib": _peak_rss_mib(),
    }
    if as_json:
        typer.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"engine, {requests:,} requests over {files:,} files (Zipf {alpha}), capacity 10% of working set")
    t.add_column("what")
    t.add_column("rate", justify="right")
    t.add_column("target", justify="right")
    for p, r in result["policies_req_per_s"].items():
        t.add_row(f"{p} alone", f"{r / 1e6:.2f} M req/s", f"≥ {TARGETS[p] / 1e6:.1f} M" if p in TARGETS else "")
    t.add_row(f"bank {len(bank_pols)} policies × 8 sizes", f"{result['bank']['events_per_s'] / 1e6:.2f} M ev/s", "≥ 1.0 M")
    t.add_row("exact LRU curve, 64 sizes", f"{result['lru_curve']['events_per_s'] / 1e6:.2f} M ev/s", "≥ 2.0 M")
    t.add_row("peak RSS of this process", f"{result['peak_rss_mib']:.0f} MiB", "")
    Console().print(t)


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _compare(trace, chosen, capacity, path, repeat, as_json, requests, files, alpha) -> None:
    import orjson

    from cachescope.bench.engine import compare_policy_rates, load_engine

    try:
        other = load_engine(path)
    except (ImportError, OSError) as e:
        typer.echo(f"error: --compare {path}: cannot load it as the engine ({e})", err=True)
        raise typer.Exit(code=2) from None
    rows = compare_policy_rates(trace, [p for p in chosen if p in other.POLICIES], capacity, other, repeat)
    if as_json:
        typer.echo(orjson.dumps({"date": time.strftime("%Y-%m-%d"), "other": path, "capacity_bytes": capacity,
                                 "policies": rows, "peak_rss_mib": _peak_rss_mib()}, option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"this build vs {path}: {requests:,} requests, {files:,} files (Zipf {alpha}), 10% of working set")
    for col in ("policy", "this M req/s", "other M req/s", "this / other"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for p, r in rows.items():
        t.add_row(p, f"{r['this'] / 1e6:.2f}", f"{r['other'] / 1e6:.2f}", f"{r['ratio']:.3f}")
    Console().print(t)
    print(f"peak RSS of this process: {_peak_rss_mib():.0f} MiB")


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


@bench_app.command("accuracy")
def accuracy(
    trace_path: Annotated[str, typer.Argument(metavar="TRACE", help="CSV trace (e.g. ../shared/reference/shared_seed1.csv.zst)")],
    policies: Annotated[str, typer.Option(help="policies to compare")] = "lru,fifo",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Error of SHARDS sampling and hash partitions against full simulation, on TRACE."""
    from pathlib import Path

    import orjson

    from cachescope.bench.accuracy import curve_errors, variant_errors
    from cachescope.errors import UsageError, UserError
    from cachescope.simulation import POLICIES, TraceError, load_trace, log_grid

    unknown = [p for p in policies.split(",") if p not in POLICIES or p == "belady"]
    if unknown:
        raise UsageError(f"--policies: unknown {', '.join(unknown)}; known: {', '.join(POLICIES)} (not belady)")
    if trace_path != "-" and not Path(trace_path).is_file():
        raise UsageError(f"{trace_path}: no such file (give a CSV trace)")
    try:
        trace = load_trace(trace_path)
    except TraceError as exc:
        raise UserError(str(exc)) from None
    ws = trace.working_set()
    if len(trace) < 2 or ws < 1000:
        raise UserError(f"{trace_path}: {len(trace)} requests over {ws} bytes: too small to measure an error on")
    capacities = [max(1, ws // 100), max(1, ws // 20), max(1, ws // 10), max(1, ws * 3 // 10)]
    rows = variant_errors(trace, policies.split(","), capacities, [
        ("sampled 0.1", 0.1, 1), ("sampled 0.01", 0.01, 1), ("4 partitions", 1.0, 4), ("48 partitions", 1.0, 48)])
    curve = curve_errors(trace, log_grid(ws // 1000, ws, 32), [
        ("curve, rate 0.1", 0.1, 0), ("curve, rate 0.01", 0.01, 0), ("curve, fixed size 8192 files", 0.1, 8192)])
    if as_json:
        typer.echo(orjson.dumps({"caches": rows, "lru_curve": curve}, option=orjson.OPT_INDENT_2).decode())
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"error vs full simulation, {len(trace):,} requests, policies {policies}, 1/5/10/30% of working set")
    for col in ("variant", "max |Δ hit efficiency|", "mean |Δ hit efficiency|"):
        t.add_column(col)
    for r in rows + curve:
        t.add_row(r["variant"], f"{r['max_abs_error']:.4f}", f"{r['mean_abs_error']:.4f}")
    Console().print(t)
