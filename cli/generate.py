"""`cachescope generate`: a synthetic, realistic grid workload written in the real log formats."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import typer

from cli.app import app
from cli._format_names import FORMAT_NAMES

# bounds that keep a run within this machine's memory and minutes (the model loops per day and
# names every server): about 100 bytes per access in memory
MAX_EVENTS = 50_000_000
MAX_DAYS = 3660.0
MAX_SITES = 1000
MAX_SERVERS = 1000


@app.command("generate")
def generate(
    out: Path = typer.Option(..., "--out", help="directory (one tree per format) or, for one format, a file"),
    fmt: str = typer.Option("all", "--format", "-f", help=f"all, or a comma list of: {', '.join(FORMAT_NAMES)}"),
    events: int = typer.Option(100_000, "--events", "-n", min=1, max=MAX_EVENTS, help="accesses (reads, writes, deletes) to draw"),
    days: float = typer.Option(7.0, "--days", min=1e-6, max=MAX_DAYS, help="length of the period (fractions: 0.001 = 86 s)"),
    sites: int = typer.Option(2, "--sites", min=1, max=MAX_SITES, help="sites (alternately mostly-ATLAS and mostly-CMS)"),
    servers: int = typer.Option(4, "--servers", min=1, max=MAX_SERVERS, help="file servers (and XCache servers) per site"),
    seed: int = typer.Option(1, "--seed", help="random seed: same seed, same output"),
    start: str = typer.Option("2024-01-01", "--start", help="UTC start date (ISO 8601)"),
    cache_fraction: float = typer.Option(0.2, "--xcache-fraction", min=0.0,
                                         help="XCache size as a fraction of each cache's working set (observed bytes)"),
    scenario: str = typer.Option("", "--scenario",
                                 help="an incident on the last day: hit-drop (a campaign floods the working set "
                                      "for 4 h) or xcache-misconfigured (the first site's XCache keeps nothing "
                                      "for 8 h); needs --days 2 or more"),
) -> None:
    """Write a deterministic synthetic workload (ATLAS-like and CMS-like) in real log formats.

    Each format renders the accesses its producer would log: XCache formats (xrootd-gstream,
    xcache-reporter) and csv hold the reads only; traces and monitoring records hold no deletes.
    Into a directory, formats whose lines name no site (dcache-billing, dcache-json, eos-report,
    http-access, csv) are written per site: parse those with --site.
    """
    from ingest.generate import PER_SITE, RENDERERS, make_workload, write

    names = list(RENDERERS) if fmt == "all" else [f.strip() for f in fmt.split(",") if f.strip()]
    unknown = [n for n in names if n not in RENDERERS]
    if unknown or not names:
        typer.echo(f"cachescope generate: unknown format(s) {unknown}; known: {', '.join(RENDERERS)}", err=True)
        raise typer.Exit(2)
    single = len(names) == 1 and not out.is_dir() and out.suffix != ""
    if len(names) > 1 and out.exists() and not out.is_dir():
        typer.echo(f"cachescope generate: --out {out} must be a directory for several formats", err=True)
        raise typer.Exit(2)
    try:
        start_dt = datetime.fromisoformat(start)
    except ValueError:
        typer.echo(f"cachescope generate: --start {start!r} is not an ISO 8601 date", err=True)
        raise typer.Exit(2) from None
    if start_dt.tzinfo is None:
        start_dt = start_dt.replace(tzinfo=timezone.utc)
    t0 = time.perf_counter()
    try:
        workload = make_workload(events, days=days, sites=sites, servers=servers, seed=seed, start=start_dt)
    except ValueError as exc:
        typer.echo(f"cachescope generate: {exc}", err=True)
        raise typer.Exit(2) from None
    incident = None
    if scenario:
        from ingest.scenarios import SCENARIOS, apply

        if scenario not in SCENARIOS:
            typer.echo(f"cachescope generate: unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}", err=True)
            raise typer.Exit(2)
        try:
            kwargs = {"cache_fraction": cache_fraction} if scenario == "xcache-misconfigured" else {}
            workload, incident = apply(scenario, workload, **kwargs)
        except ValueError as exc:
            typer.echo(f"cachescope generate: --scenario {scenario}: {exc}", err=True)
            raise typer.Exit(2) from None
    if cache_fraction != 0.2:
        workload.observed(cache_fraction)
    for name in names:
        t1 = time.perf_counter()
        files = write(name, workload, out, single_file=single)
        where = files[0] if single else out / name
        per_site = " (per site)" if name in PER_SITE and not single else ""
        print(f"{name}: {len(files)} file(s) in {where}{per_site}, {time.perf_counter() - t1:.1f}s", file=sys.stderr)
    if incident is not None:
        print(f"scenario {incident.describe()}", file=sys.stderr)
    print(f"generated {len(workload)} accesses over {days:g} days at {sites} site(s) in {time.perf_counter() - t0:.1f}s",
          file=sys.stderr)
