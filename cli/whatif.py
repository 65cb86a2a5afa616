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
    start: Annotated[str, typer.Option("--from", help="start of the range, ISO 8601 (UTC unless it says)")],
    end: Annotated[str, typer.Option("--to", help="end of the range (exclusive), ISO 8601")],
    size: Annotated[Optional[str], typer.Option("--size", help="cache sizes, comma-separated: 10TB, 50TiB or bytes; "
                                                "with --recommend the smallest and largest to consider (default 1TB,1PB)")] = None,
    store: Annotated[Optional[Path], typer.Option("--store", help="embedded store directory (chDB)")] = None,
    clickhouse: Annotated[Optional[str], typer.Option("--clickhouse", help="server URL, clickhouse://host:port[/db]")] = None,
    database: Annotated[Optional[str], typer.Option("--database", help="database (default: cachescope)")] = None,
    cache_group: Annotated[Optional[str], typer.Option("--cache-group", help="cache groups, comma-separated (several: one regional cache)")] = None,
    site: Annotated[Optional[str], typer.Option("--site", help="only the cache groups of this site")] = None,
    warmup: Annotated[Optional[str], typer.Option("--warmup", help="accesses before --from that fill the cache uncounted: 1d, 12h, P7D")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per (policy, size), as POST /v1/whatif answers")] = False,
    progress: Annotated[Optional[bool], typer.Option("--progress/--no-progress", help="progress bar (default: on a terminal)")] = None,
    recommend: Annotated[Optional[float], typer.Option("--recommend", metavar="TARGET", help="per policy, the smallest size "
                                                       "reaching this efficiency (0–1), within 1 %, as GET /v1/recommend")] = None,
    of_optimum: Annotated[bool, typer.Option("--of-optimum", help="--recommend's TARGET is a fraction of the optimum (an infinite cache)")] = False,
    metric: Annotated[str, typer.Option("--metric", help="--recommend sizes for transfer or hit efficiency")] = "transfer",
) -> None:
    """Replay the stored read accesses of [--from, --to) through each (policy, size): hit and
    transfer efficiency, by data tier (and by cache group when several are merged). With
    --recommend TARGET: per policy the smallest size reaching TARGET, and the bracket that shows it."""
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
    if recommend is not None:
        if not 0 < recommend <= 1 or metric not in ("hit", "transfer"):
            raise UsageError(f"--recommend {recommend:g} --metric {metric}: a target in (0, 1], metric hit or transfer")
        if warmup:
            raise UsageError("--warmup does not apply to --recommend (its replays start cold at --from)")
        if len(sizes) not in (0, 2) or (sizes and sizes[0] >= sizes[1]):
            raise UsageError("with --recommend, --size is the smallest and largest size to consider: MIN,MAX")
    if not policies or not (sizes or recommend is not None):
        raise UsageError("give at least one --policy and one --size")
    try:
        warm = dt.timedelta(microseconds=parse_duration_us(warmup)) if warmup else dt.timedelta(0)
    except ValueError as e:
        raise UsageError(f"--warmup: {e}") from None

    from cachescope import reads
    from cachescope.store import open_store

    groups = _list(cache_group)
    with open_store(store_dir=store, clickhouse_url=clickhouse, database=database) as st:
        try:
            _answer(st, policies, sizes, t0, t1, groups, site, warm, progress, as_json, recommend, of_optimum, metric)
        except reads.UnknownName as e:  # the library's check (replay.check_names), named as the option
            known = ", ".join(e.known) or "none (replay some logs first)"
            raise UserError(f"--{e.field.replace('_', '-')} {e.value}: not in the store; known: {known}") from None


def _answer(st, policies, sizes, t0, t1, groups, site, warm, progress, as_json, recommend, of_optimum, metric) -> None:
    import sys

    from cachescope.replay import WhatIf, WhatIfError, run_whatif, scope
    from cli._progress import with_progress

    if recommend is not None:
        return _recommend(st, policies, sizes, t0, t1, groups, site, recommend, of_optimum, metric, as_json)
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


def _recommend(st, policies, sizes, t0, t1, groups, site, target, of_optimum, metric, as_json) -> None:
    import sys

    import orjson

    from cachescope.recommend import Recommend, recommend
    from cachescope.replay import WhatIfError
    from cachescope.units import format_size

    rec = Recommend(policies, t0, t1, cache_groups=groups, sites=[site] if site else [], metric=metric,
                    target=None if of_optimum else target, fraction_of_optimum=target if of_optimum else None,
                    **({"min_size": sizes[0], "max_size": sizes[1]} if sizes else {}))
    try:
        answer = recommend(st, rec)
    except WhatIfError as e:
        option = {"target": "--recommend", "max_size": "--size", "policy": "--policy"}.get(e.field, f"--{e.field}")
        raise UserError(f"{option}: {e}") from None
    if as_json:
        sys.stdout.buffer.write(orjson.dumps({"cache_group": groups, "from": t0.isoformat(), "to": t1.isoformat(),
                                              **answer}, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"smallest size reaching {answer['recommendations'][0]['target']}")
    for col in ("policy", "size", "efficiency there", "lower size (misses)", "its efficiency", "passes", "method"):
        t.add_column(col, justify="left" if col in ("policy", "size", "method") else "right")
    for r in answer["recommendations"]:
        b = r["bracket"]
        t.add_row(r["policy"], format_size(r["smallest_size_bytes"]) if r["reached"] else "not reached",
                  f"{r['value_at_size']:.4f}" if r["reached"] else "",
                  format_size(b["lower_size_bytes"]) if b["lower_size_bytes"] is not None else "(min reaches)",
                  f"{b['lower_value']:.4f}" if b["lower_value"] is not None else "", str(b["passes"]),
                  "exact curve" if r["policy"] == "lru" else "search")
    Console().print(t)
    print(answer["method"])


def _print_table(answers: list[dict], accesses: int, t0: dt.datetime, t1: dt.datetime) -> None:
    from rich.console import Console
    from rich.table import Table

    from cachescope.units import format_efficiency, format_size

    t = Table(title=f"{accesses:,} accesses, {t0:%Y-%m-%d %H:%M} – {t1:%Y-%m-%d %H:%M} UTC")
    for col in ("policy", "size", "hit efficiency", "transfer efficiency", "reads", "hits", "delayed hits", "bytes hit"):
        t.add_column(col, justify="left" if col in ("policy", "size") else "right")
    for a in answers:
        t.add_row(a["policy"], format_size(a["size_bytes"]), format_efficiency(a["hit_ratio"]), format_efficiency(a["byte_hit_ratio"]),
                  f"{a['requests']:,}", f"{a['hits']:,}", f"{a['delayed_hits']:,}", format_size(a["bytes_hit"]))
    Console().print(t)
    by = Table(title="by data tier")
    for col in ("data tier", "policy", "size", "hit efficiency", "transfer efficiency", "reads"):
        by.add_column(col, justify="left" if col in ("data tier", "policy", "size") else "right")
    for name in sorted({name for a in answers for name in a["by_tier"]}):
        for a in answers:
            if name in a["by_tier"]:
                row = a["by_tier"][name]
                by.add_row(name, a["policy"], format_size(a["size_bytes"]), format_efficiency(row["hit_ratio"]),
                           format_efficiency(row["byte_hit_ratio"]), f"{row['requests']:,}")
    if by.row_count:
        Console().print(by)
