"""`cachescope whatif`: the stored accesses of a range replayed through any policies and sizes —
the same library call and the same answer as `POST /v1/whatif`, without a server."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Optional

import typer

from cachescope.errors import UsageError, UserError
from cli.app import app


def _time(value: str, option: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{option} {value!r} is not an ISO 8601 time (e.g. 2024-01-03T06:00)") from None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


def _list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@app.command()
def whatif(
    policy: Annotated[str, typer.Option("--policy", help="policies, comma-separated (lru,arc,…)")],
    size: Annotated[str, typer.Option("--size", help="cache sizes, comma-separated: 10TB, 50TiB or bytes")],
    start: Annotated[str, typer.Option("--from", help="start of the range, ISO 8601 (UTC unless it says)")],
    end: Annotated[str, typer.Option("--to", help="end of the range (exclusive), ISO 8601")],
    store: Annotated[Optional[Path], typer.Option("--store", help="embedded store directory (chDB)")] = None,
    clickhouse: Annotated[Optional[str], typer.Option("--clickhouse", help="server URL, clickhouse://host:port[/db]")] = None,
    database: Annotated[Optional[str], typer.Option("--database", help="database (default: cachescope)")] = None,
    cache_group: Annotated[Optional[str], typer.Option("--cache-group", help="cache groups, comma-separated (several: one regional cache)")] = None,
    site: Annotated[Optional[str], typer.Option("--site", help="only the cache groups of this site")] = None,
    warmup: Annotated[Optional[str], typer.Option("--warmup", help="accesses before --from that fill the cache uncounted: 1d, 12h, P7D")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per (policy, size), as POST /v1/whatif answers")] = False,
    progress: Annotated[Optional[bool], typer.Option("--progress/--no-progress", help="progress bar (default: on a terminal)")] = None,
) -> None:
    """Replay the stored read accesses of [--from, --to) through each (policy, size): hit and
    transfer efficiency, by data tier (and by cache group when several are merged)."""
    import sys

    from cachescope.config.durations import parse_duration_us
    from cachescope.units import parse_size

    if (store is None) == (clickhouse is None):
        raise UsageError("give exactly one of --store DIR or --clickhouse URL")
    if store is not None and not store.is_dir():
        raise UserError(f"--store {store} is not a directory (replay into it first)")
    t0, t1 = _time(start, "--from"), _time(end, "--to")
    if t1 <= t0:
        raise UsageError(f"--to {end} must be after --from {start}")
    policies, sizes = _list(policy), [parse_size(s) for s in _list(size)]
    if not policies or not sizes:
        raise UsageError("give at least one --policy and one --size")
    try:
        warm = dt.timedelta(microseconds=parse_duration_us(warmup)) if warmup else dt.timedelta(0)
    except ValueError as e:
        raise UsageError(f"--warmup: {e}") from None

    from cachescope import reads
    from cachescope.store import open_store
    from cachescope.replay import WhatIf, WhatIfError, run_whatif, scope
    from cli._progress import with_progress

    groups = _list(cache_group)
    with open_store(store_dir=store, clickhouse_url=clickhouse, database=database) as st:
        known = reads.cache_groups(st)
        unknown = [g for g in groups if g not in set(known["cache_group"].astype(str))]
        if unknown:
            raise UserError(f"--cache-group {','.join(unknown)}: not in the store; known: "
                            f"{', '.join(known['cache_group'].astype(str)) or 'none (replay some logs first)'}")
        if site and site not in set(known["site"].astype(str)):
            raise UserError(f"--site {site}: not in the store; known: {', '.join(sorted(set(known['site'].astype(str))))}")
        req = WhatIf(policies=policies, sizes=sizes, start=t0, end=t1, cache_groups=groups,
                     sites=[site] if site else [], warmup=warm)
        try:
            accesses, tiers = scope(st, req)
            show = sys.stderr.isatty() if progress is None else progress
            result = with_progress(show, f"replaying {accesses:,} accesses", lambda tick: run_whatif(
                st, req, tier_names=tiers, on_chunk=tick or (lambda rows: None)), total=accesses)
        except WhatIfError as e:
            raise UserError(f"--{e.field.replace('_', '-')}: {e}") from None
    answers = result.answers()
    if as_json:
        import orjson

        for a in answers:
            a.update(accesses=result.accesses, warmup_accesses=result.warmup_accesses)
            sys.stdout.buffer.write(orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return
    _print_table(answers, result.accesses, t0, t1)


def _print_table(answers: list[dict], accesses: int, t0: dt.datetime, t1: dt.datetime) -> None:
    from rich.console import Console
    from rich.table import Table

    from cachescope.units import format_size

    t = Table(title=f"{accesses:,} accesses, {t0:%Y-%m-%d %H:%M} – {t1:%Y-%m-%d %H:%M} UTC")
    for col in ("policy", "size", "hit efficiency", "transfer efficiency", "reads", "hits", "bytes hit"):
        t.add_column(col, justify="left" if col in ("policy", "size") else "right")
    for a in answers:
        t.add_row(a["policy"], format_size(a["size_bytes"]), f"{a['hit_ratio']:.4f}", f"{a['byte_hit_ratio']:.4f}",
                  f"{a['requests']:,}", f"{a['hits']:,}", format_size(a["bytes_hit"]))
    Console().print(t)
    by = Table(title="by data tier")
    for col in ("data tier", "policy", "size", "hit efficiency", "transfer efficiency", "reads"):
        by.add_column(col, justify="left" if col in ("data tier", "policy", "size") else "right")
    for name in sorted({name for a in answers for name in a["by_tier"]}):
        for a in answers:
            if name in a["by_tier"]:
                row = a["by_tier"][name]
                by.add_row(name, a["policy"], format_size(a["size_bytes"]), f"{row['hit_ratio']:.4f}",
                           f"{row['byte_hit_ratio']:.4f}", f"{row['requests']:,}")
    if by.row_count:
        Console().print(by)
