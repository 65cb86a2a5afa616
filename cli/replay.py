"""`cachescope replay --format F [--site S] [--config C] --store DIR FILE…`: the embedded pipeline.

Parses the logs, runs the configured shadow caches (the `pipeline:` section of the config) and
writes events, efficiencies, curves and the real cache's observations into the embedded store at
DIR. Rejected (malformed) lines and late events are kept in DIR/rejects.jsonl (JSON lines, with
their reason; the first `ingest.rejects_per_reason` per reason, the rest counted in the summary); lines skipped by design (door requests, headers ...) are counted by
reason in the summary. Exit 1 when an input is damaged (the lines before the damage are stored)
or none of its lines is usable (every one rejected),
130/143 when stopped by SIGINT/SIGTERM (at a batch boundary; run the same command again).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Optional

import typer

from cli.app import app
from cachescope.errors import EXIT_SIGINT, EXIT_SIGTERM, UsageError, UserError
from cachescope.units import format_efficiency, format_size


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

    import msgspec
    import orjson

    from cachescope.config import load_config
    from ingest.formats import FORMATS

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    for f in files:
        if str(f) != "-" and not (f.is_file() or f.is_fifo()):  # a pipe: `<(zcat …)`, a named FIFO
            raise UsageError(f"{f}: {'is a directory, not a log file' if f.is_dir() else 'no such file'}")
    from cli._checks import database_name

    database_name(database)
    cfg = load_config(config)  # UsageError naming the field on a bad configuration
    _check_store(store)
    # SIGINT / SIGTERM: finish the batch in hand, write it, stop (a second signal stops at once)
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum, frame) -> None:
        received.append(signum)
        stop.set()
        signal.signal(signum, previous[signum])

    # installed before the rejects file exists: whoever sees that file may signal
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def restore_signals() -> None:
        for s, handler in previous.items():
            if signal.getsignal(s) is on_signal:
                signal.signal(s, handler)

    rejects_path = rejects or store / "rejects.jsonl"
    try:
        out = open(rejects_path, "ab")  # noqa: SIM115
    except OSError as exc:
        restore_signals()
        raise UserError(f"cannot write the rejects file {rejects_path}: {exc.strerror} "
                        "(give a writable --rejects FILE)", 2 if rejects else 1) from None

    encode = msgspec.json.Encoder().encode

    def write_rejects(data: bytes) -> None:
        try:
            out.write(data)
        except OSError as exc:
            raise _rejects_failed(rejects_path, exc) from None

    from ingest.rejects import RejectLimit

    limit = RejectLimit(cfg.ingest.rejects_per_reason)
    late_reason = "late: its window had closed (allowed lateness passed)"

    def on_reject(source, rec) -> None:  # malformed lines only: lines skipped by design are counted
        if limit.admit(rec.reason):
            write_rejects(orjson.dumps({"file": source, **orjson.loads(encode(rec))}) + b"\n")

    def on_late(late) -> None:
        for i in range(len(late)):
            if not limit.admit(late_reason):
                continue
            write_rejects(orjson.dumps({"file": None, "line": None, "skipped": False,
                                        "reason": late_reason,
                                        "cache_group": late.cache_group[i], "ts": int(late.ts[i]),
                                        "seq": int(late.seq[i]), "path": late.path[i]}) + b"\n")

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=err, transient=True, disable=not err.is_terminal)
    from runners.parse_streams import open_streams

    # the parse processes start before this process imports the store and the core: they read
    # the first batches while it does (a second of a million-line replay)
    streams = None
    close_error: OSError | None = None
    try:
        streams = open_streams(list(files), fmt, cfg, site, on_reject)
        from cachescope.store import StoreError, open_store
        from cachescope.store.migrations import MigrationError
        from runners.allocator import keep_freed_memory
        from runners.embedded import replay as run_replay

        # what exists now (modules, config) outlives the replay: full collections need not walk it
        gc.freeze()
        keep_freed_memory()
        try:
            with progress, open_store(store_dir=store, database=database) as st:
                task = progress.add_task("replaying", total=None)
                summary = run_replay(files, fmt, config=cfg, store=st, site=site, on_reject=on_reject,
                                     on_late=on_late, stop=stop, streams=streams,
                                     on_progress=lambda n: progress.update(task, description=f"{n:,} events"))
                streams = None  # closed by the replay
        except (StoreError, MigrationError) as exc:
            raise UserError(f"store {store}: {exc}") from None
    finally:
        gc.unfreeze()
        for s in streams or []:
            s.close()
        restore_signals()
        try:
            out.close()
        except OSError as exc:  # the last rejects could not be written: an error once the rest is said
            close_error = exc
    if close_error is not None:
        raise _rejects_failed(rejects_path, close_error)

    if not summary.interrupted:
        try:
            _print_results(summary, as_json)
        except BrokenPipeError:  # `cachescope replay … | head`: the store is complete, the reader left
            pass
    rate = summary.events / summary.seconds if summary.seconds else 0.0
    skipped = ", ".join(f"{reason} {n:,}" for reason, n in sorted(summary.skipped_by_reason.items(),
                                                                    key=lambda kv: -kv[1]))
    err.print(f"{summary.files} file(s), {summary.lines:,} lines → {summary.events:,} events "
              f"({summary.rejected:,} rejected, {summary.skipped:,} skipped, {summary.late:,} late; "
              f"rejects in {rejects_path}); rows written: "
              + ", ".join(f"{t} {n:,}" for t, n in sorted(summary.rows.items()))
              + f"; {summary.seconds:.1f} s, {rate:,.0f} events/s; store {store}")
    if skipped:
        err.print(f"skipped by design (not accesses, not in the rejects): {skipped}")
    if limit.not_written:
        err.print(limit.summary())
    if summary.interrupted:
        if not received and summary.signal is not None:
            received.append(summary.signal)
        name = signal.Signals(received[0]).name if received else "a signal"
        raise UserError(f"interrupted by {name}: stored {summary.events:,} events and the windows closed before "
                        "the stop (open windows were not written); run the same command again to complete the "
                        "store (rows already written are replaced by identical ones)",
                        EXIT_SIGTERM if received and received[0] == signal.SIGTERM else EXIT_SIGINT)
    if summary.errors:
        raise UserError(f"{len(summary.errors)} damaged input file(s), the lines before the damage were stored: "
                        + "; ".join(summary.errors))
    if summary.unusable:
        raise UserError("nothing usable was read from " + "; ".join(
            f"{name} (all {lines:,} lines rejected)" for name, lines in summary.unusable)
            + f": not {fmt} records (is --format right?); the rejects are in {rejects_path}")


def _rejects_failed(path: Path, exc: OSError) -> UserError:
    import errno

    if exc.errno == errno.ENOSPC:
        return UserError(f"the disk holding the rejects file {os.path.abspath(path)} is full: free space there, then "
                         "run the same command again (it completes the store: rows already written are replaced "
                         "by identical ones)")
    return UserError(f"cannot write the rejects file {path}: {exc.strerror or exc}")


def _check_store(store: Path) -> None:
    """The store must be a writable directory (created when missing)."""
    if store.exists() and not store.is_dir():
        raise UsageError(f"--store {store} is a file; give a directory (created when missing)")
    try:
        store.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the store directory {store}: {exc.strerror}") from None
    if not os.access(store, os.W_OK | os.X_OK):
        raise UserError(f"the store directory {store} is not writable (check its permissions or give another --store)")


def _print_results(summary, as_json: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    import orjson

    df = summary.ratios()
    if as_json:
        for row in df.to_dict("records"):
            sys.stdout.buffer.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return
    table = Table(title=f"shadow caches over {summary.events:,} events", title_justify="left")
    for col in ("cache group", "policy", "size", "requests", "hit efficiency", "transfer efficiency"):
        table.add_column(col, justify="left" if col in ("cache group", "policy") else "right")
    for r in df.sort_values(["cache_group", "policy", "size_bytes"]).itertuples():
        table.add_row(r.cache_group, r.policy, format_size(int(r.size_bytes)), f"{r.requests:,}",
                      format_efficiency(r.hit_ratio), format_efficiency(r.byte_hit_ratio))
    Console().print(table)
