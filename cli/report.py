"""`cachescope report`: PNG plots and one self-contained HTML page of a period."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.app import app


def _time(value: Optional[str], option: str):
    import datetime as dt

    if value is None:
        return None
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        typer.echo(f"cachescope report: {option} {value!r} is not an ISO 8601 time (e.g. 2024-01-03T06:00)", err=True)
        raise typer.Exit(2) from None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t


@app.command()
def report(
    out: Path = typer.Option(..., "--out", help="directory for the PNG plots and report.html"),
    store: Optional[Path] = typer.Option(None, "--store", help="embedded store directory (chDB)"),
    clickhouse: Optional[str] = typer.Option(None, "--clickhouse", help="server URL, clickhouse://host:port[/db]"),
    database: Optional[str] = typer.Option(None, "--database", help="database (default: cachescope)"),
    start: Optional[str] = typer.Option(None, "--from", help="start, ISO 8601 UTC (default: the first window)"),
    end: Optional[str] = typer.Option(None, "--to", help="end, ISO 8601 UTC (default: the last window)"),
) -> None:
    """Miss-ratio curves with Belady, efficiency by tier, one vs N caches, real vs shadow, alerts."""
    if (store is None) == (clickhouse is None):
        typer.echo("cachescope report: give exactly one of --store DIR or --clickhouse URL", err=True)
        raise typer.Exit(2)
    if store is not None and not store.is_dir():
        typer.echo(f"cachescope report: --store {store} is not a directory (replay into it first)", err=True)
        raise typer.Exit(1)
    t0, t1 = _time(start, "--from"), _time(end, "--to")
    from cachescope import report as rep
    from cachescope.store import StoreError, open_store

    try:
        with open_store(store_dir=store, clickhouse_url=clickhouse, database=database) as st:
            sections, a, b = rep.build(st, t0, t1)
    except StoreError as e:
        where = store if store is not None else clickhouse
        typer.echo(f"cachescope report: reading {where} failed: {str(e).splitlines()[0]}", err=True)
        raise typer.Exit(1) from None
    except ValueError as e:
        typer.echo(f"cachescope report: {e}", err=True)
        raise typer.Exit(1) from None
    page = rep.write(sections, a, b, out)
    for s in sections:
        typer.echo(f"{s.title}: {len(s.table)} row(s)" + (f", {out / (s.key + '.png')}" if s.png else ""))
    typer.echo(f"report: {page}")
