"""`cachescope replay --format F [--site S] [--config C] --store DIR FILE…`: the embedded pipeline.

Parses the logs, runs the configured shadow caches (the `pipeline:` section of the config) and
writes events, efficiencies, curves and the real cache's observations into the embedded store at
DIR. Rejected lines and late events are kept (JSON lines, with their reason), never dropped.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import msgspec
import orjson
import typer

from cachescope.cli.app import app
from cachescope.units import format_size

_encode = msgspec.json.Encoder().encode


@app.command()
def replay(
    files: list[Path] = typer.Argument(..., metavar="FILE…", help="log files (plain, gzip or zstd), merged by time"),
    fmt: str = typer.Option(..., "--format", "-f", help="log format (see `cachescope parse --help`)"),
    store: Path = typer.Option(..., "--store", help="embedded store directory (created if missing)"),
    site: str = typer.Option("", "--site", help="site name for formats whose lines name none"),
    config: Optional[Path] = typer.Option(None, "--config", help="site configuration YAML (pipeline: caches, windows)"),
    database: str = typer.Option("cachescope", "--database", help="database inside the store"),
    rejects: Optional[Path] = typer.Option(None, "--rejects", help="rejected lines and late events, JSON lines "
                                                                    "(default DIR/rejects.jsonl, appended)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per (cache group, policy, size) instead of a table"),
) -> None:
    """Replay storage or cache logs through the shadow caches into the embedded store."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from cachescope.config import load_config
    from cachescope.runners.embedded import replay as run_replay
    from cachescope.store import StoreError, open_store
    from cachescope.store.migrations import MigrationError
    from ingest.formats import FORMATS

    err = Console(stderr=True)
    if fmt not in FORMATS:
        err.print(f"replay: unknown format {fmt!r}; known: {', '.join(FORMATS)}")
        raise typer.Exit(2)
    missing = [str(f) for f in files if str(f) != "-" and not f.is_file()]
    if missing:
        err.print(f"replay: no such file: {', '.join(missing)}")
        raise typer.Exit(2)
    try:
        cfg = load_config(config)
    except Exception as exc:  # noqa: BLE001 - any config problem is a usage error
        err.print(f"replay: config {config}: {exc}")
        raise typer.Exit(2) from None
    store.mkdir(parents=True, exist_ok=True)
    rejects_path = rejects or store / "rejects.jsonl"
    out = open(rejects_path, "ab")  # noqa: SIM115

    def on_reject(source, rec) -> None:
        out.write(orjson.dumps({"file": source, **orjson.loads(_encode(rec))}) + b"\n")

    def on_late(late) -> None:
        for i in range(len(late)):
            out.write(orjson.dumps({"file": None, "line": None, "skipped": False,
                                    "reason": "late: its window had closed (allowed lateness passed)",
                                    "cache_group": late.cache_group[i], "ts": int(late.ts[i]),
                                    "seq": int(late.seq[i]), "path": late.path[i]}) + b"\n")

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    try:
        with progress, open_store(store_dir=store, database=database) as st:
            task = progress.add_task("replaying", total=None)
            summary = run_replay(files, fmt, config=cfg, store=st, site=site, on_reject=on_reject, on_late=on_late,
                                 on_progress=lambda n: progress.update(task, description=f"{n:,} events"))
    except (StoreError, MigrationError, OSError) as exc:
        err.print(f"replay: {exc}")
        raise typer.Exit(1) from None
    finally:
        out.close()

    df = summary.ratios()
    if as_json:
        for row in df.to_dict("records"):
            sys.stdout.buffer.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    else:
        table = Table(title=f"shadow caches over {summary.events:,} events", title_justify="left")
        for col in ("cache group", "policy", "size", "requests", "hit ratio", "byte hit ratio"):
            table.add_column(col, justify="left" if col in ("cache group", "policy") else "right")
        for r in df.sort_values(["cache_group", "policy", "size_bytes"]).itertuples():
            table.add_row(r.cache_group, r.policy, format_size(int(r.size_bytes)), f"{r.requests:,}",
                          f"{r.hit_ratio:.4f}", f"{r.byte_hit_ratio:.4f}")
        Console().print(table)
    rate = summary.events / summary.seconds if summary.seconds else 0.0
    err.print(f"{summary.files} file(s), {summary.lines:,} lines → {summary.events:,} events "
              f"({summary.rejected:,} rejected, {summary.skipped:,} skipped, {summary.late:,} late; "
              f"rejects in {rejects_path}); rows written: "
              + ", ".join(f"{t} {n:,}" for t, n in sorted(summary.rows.items()))
              + f"; {summary.seconds:.1f} s, {rate:,.0f} events/s; store {store}", highlight=False)
