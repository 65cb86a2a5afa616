"""`cachescope parse --format F [--site S] [--config C] [--rejects FILE] FILE|-`.

AccessEvent JSON lines on stdout; every line that gives no event as a JSON line
`{"line": N, "reason": ..., "text": ..., "skipped": bool}` on stderr or in --rejects
(`skipped`: well-formed but not an access that counts, e.g. a dCache door request); only the
first `ingest.rejects_per_reason` (1000) per reason are written, the rest counted in one last
`{"rejects_not_written": N, "rejects_per_reason": K, "by_reason": {...}}` line there.
Exit status 0 unless the input (or the config) cannot be read: 1 when the input is damaged
(truncated or corrupt gzip/zstd, or a line longer than 16 MiB; the events before the damage are
written) or has lines of which none is usable (every one rejected: the wrong --format, or not a
log), 2 for bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from cli.app import app
from cli._format_names import FORMAT_NAMES


@app.command("parse")
def parse(
    source: str = typer.Argument(..., metavar="FILE|-", help="log file (plain, gzip or zstd) or '-' for stdin"),
    fmt: str = typer.Option(..., "--format", "-f", help=f"one of: {', '.join(FORMAT_NAMES)}"),
    site: str = typer.Option("", "--site", help="site name for every event (default: the record's, else the config's)"),
    config: Optional[Path] = typer.Option(None, "--config", help="cachescope YAML config"),
    rejects: Optional[Path] = typer.Option(None, "--rejects", help="write rejected lines here instead of stderr"),
    server: str = typer.Option("", "--server", help="server name for records that name none"),
    year: Optional[int] = typer.Option(None, "--year", min=1970, max=9999, help="year of dCache billing dates (default: from the file name)"),
    seq_start: Optional[int] = typer.Option(None, "--seq-start", min=0, help="first seq number"),
    origin: Optional[str] = typer.Option(None, "--origin", help="id of this log stream (default file:HOST:PATH, "
                                         "stdin:HOST for '-'); with seq, an event's identity"),
    stats: bool = typer.Option(False, "--stats", help='finish with one {"stats": {...}} JSON line on stderr'),
) -> None:
    """Parse a storage or cache log into AccessEvent JSON lines."""
    import msgspec
    import orjson

    from cachescope.config import load_config
    from cachescope.events import encode_lines
    from ingest.pipeline import LineParser, RejectRecord, open_lines

    _reject_encoder = msgspec.json.Encoder()
    from ingest.formats import FORMATS

    if fmt not in FORMATS:
        typer.echo(f"cachescope parse: unknown format {fmt!r}; known: {', '.join(FORMATS)}", err=True)
        raise typer.Exit(2)
    try:
        cfg = load_config(config)
    except Exception as exc:  # noqa: BLE001 - any config problem is a usage error
        typer.echo(f"cachescope parse: config {config}: {exc}", err=True)
        raise typer.Exit(2) from None
    if source != "-" and not Path(source).exists():  # a typo on the command line: usage, as for the others
        typer.echo(f"cachescope parse: cannot read {source}: no such file", err=True)
        raise typer.Exit(2)
    try:
        lines = open_lines(source)
    except OSError as exc:
        typer.echo(f"cachescope parse: cannot read {source}: {exc}", err=True)
        raise typer.Exit(1) from None

    try:
        reject_out = open(rejects, "wb") if rejects else sys.stderr.buffer  # noqa: SIM115
    except OSError as exc:
        typer.echo(f"cachescope parse: cannot write --rejects {rejects}: {exc}", err=True)
        raise typer.Exit(2) from None

    from ingest.rejects import RejectLimit

    limit = RejectLimit(cfg.ingest.rejects_per_reason)

    def on_reject(rec: "RejectRecord") -> None:
        if limit.admit(rec.reason):
            reject_out.write(_reject_encoder.encode(rec) + b"\n")

    try:
        parser = LineParser(fmt, config=cfg, site=site, server=server, source_name=source, year=year, origin=origin,
                            seq_start=seq_start, on_reject=on_reject)
    except Exception as exc:  # noqa: BLE001 - bad format strings or tier rules in the config
        typer.echo(f"cachescope parse: {exc}", err=True)
        raise typer.Exit(2) from None
    out = sys.stdout.buffer
    try:
        for batch in parser.batches(lines):
            out.write(encode_lines(batch))
        out.flush()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            return
        typer.echo(f"cachescope parse: reading {source} failed: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:  # a damaged input (InputError) ends here too: the events before it are out, exit 1
        if limit.not_written:  # said once, where the rejects go (stderr or --rejects), as a JSON line of its own
            reject_out.write(orjson.dumps(limit.as_dict()) + b"\n")
        if rejects:
            reject_out.close()
        else:
            reject_out.flush()
        if stats:
            summary = parser.stats.as_dict()
            summary["rejects_not_written"] = limit.not_written
            if parser.error:
                summary["error"] = parser.error
            sys.stderr.buffer.write(orjson.dumps({"stats": summary}) + b"\n")
    if parser.stats.unusable():  # no line usable: as unreadable as a damaged file, not a short success
        where = f"in {rejects}" if rejects else "on stderr"
        typer.echo(f"cachescope parse: none of the {parser.stats.lines:,} lines of {source} is a {fmt} record "
                   f"(every line rejected, see the rejects {where}): is --format right?", err=True)
        raise typer.Exit(1)
