"""From a notebook: what-if replays, recommendations and the read layer's answers as pandas DataFrames.

`cachescope.whatif(...)` is `whatif` here (imported on first use: `import cachescope` stays cheap).
Every function takes the store as its first argument: an open Store, an embedded store's directory
or a server's `clickhouse://host:port[/db]` URL (opened once per process and kept open), and times
as datetimes or ISO 8601 strings (UTC unless they say). Efficiencies are NaN where nothing was read
(an empty window has no efficiency), never 0.
"""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from cachescope import reads
from cachescope.recommend import Recommend, recommend as _recommend
from cachescope.admission import AdmissionConfig
from cachescope.replay import WhatIf, run_whatif
from cachescope.store import Store, open_store
from cachescope.units import parse_size

#: the read layer's answers offered here (cachescope.reads), each taking a store path or URL and ISO times too
READS = ("efficiency_totals", "efficiency_series", "mrc", "best_policy", "cache_groups", "live_configs", "time_span",
         "residence_series", "observed_series", "observed_servers", "cache_split", "alerts", "pipeline_health")
__all__ = ["connect", "whatif", "recommend", *READS]

_open: dict[str, Store] = {}
COUNTS = ("requests", "hits", "bytes_requested", "bytes_hit", "bytes_filled", "evictions")


def connect(store: Store | str | Path, database: str | None = None) -> Store:
    """An open Store: `store` itself, or the one at that directory or clickhouse:// URL (kept open)."""
    if isinstance(store, Store):
        return store
    where = str(store)
    key = f"{where}#{database or ''}"
    if key not in _open:
        url = where.startswith(("clickhouse://", "http://", "https://"))
        _open[key] = open_store(store_dir=None if url else where, clickhouse_url=where if url else None,
                                database=database)
    return _open[key]


def _time(t: dt.datetime | str) -> dt.datetime:
    t = dt.datetime.fromisoformat(t.replace("Z", "+00:00")) if isinstance(t, str) else t
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


def _names(v: str | Sequence[str] | None) -> list[str]:
    if v is None:
        return []
    return [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else [str(x) for x in v]


def _sizes(v) -> list[int]:
    items = v.split(",") if isinstance(v, str) else (v if isinstance(v, (list, tuple)) else [v])
    return [int(s) if isinstance(s, (int, np.integer)) else parse_size(str(s).strip()) for s in items]


def _efficiencies(df: pd.DataFrame) -> pd.DataFrame:
    """Hit and transfer efficiency, NaN over an empty denominator (nothing read has no efficiency)."""
    df["hit_efficiency"] = df["hits"] / df["requests"].where(df["requests"] > 0)
    df["transfer_efficiency"] = df["bytes_hit"] / df["bytes_requested"].where(df["bytes_requested"] > 0)
    return df


def whatif(store: Store | str | Path, policy: str | Sequence[str], size, start: dt.datetime | str,
           end: dt.datetime | str, *, cache_group: str | Sequence[str] | None = None, site: str | None = None,
           warmup: dt.timedelta = dt.timedelta(0), sample_rate: float = 1.0, exclude_tiers: Sequence[str] = (),
           max_file_size: int | None = None, by: str | None = None) -> pd.DataFrame:
    """Replay the stored read accesses of [start, end) through every (policy, size), as
    `cachescope whatif` and `POST /v1/whatif` do: one row per (policy, size), or per (policy, size,
    tier) with by="tier", per (policy, size, cache_group) with by="cache_group" (several groups
    merged as one regional cache). Columns: the counters, hit_efficiency, transfer_efficiency."""
    if by not in (None, "tier", "cache_group"):
        raise ValueError(f"by={by!r}: None, 'tier' or 'cache_group'")
    req = WhatIf(_names(policy), _sizes(size), _time(start), _time(end), cache_groups=_names(cache_group),
                 sites=[site] if site else [], warmup=warmup, sample_rate=sample_rate,
                 admission=AdmissionConfig(exclude_tiers=list(exclude_tiers), max_file_size=max_file_size))
    rows = []
    for a in run_whatif(connect(store), req).answers():
        parts = {None: {None: a}, "tier": a["by_tier"], "cache_group": a.get("by_cache_group") or {}}[by]
        for name, c in parts.items():
            rows.append({"policy": a["policy"], "size_bytes": a["size_bytes"], **({by: name} if by else {}),
                         **{k: c[k] for k in COUNTS if k in c}})
    keys = ["policy", "size_bytes", *([by] if by else [])]
    return _efficiencies(pd.DataFrame(rows, columns=[*keys, *COUNTS]))


def recommend(store: Store | str | Path, policy: str | Sequence[str], start: dt.datetime | str,
              end: dt.datetime | str, *, target: float | None = None, fraction_of_optimum: float | None = None,
              metric: str = "transfer", min_size="1TB", max_size="1PB", cache_group: str | Sequence[str] | None = None,
              sample_rate: float = 1.0) -> pd.DataFrame:
    """Per policy the smallest size reaching the target within 1 % (as `GET /v1/recommend`): one
    row per policy with the bracket (lower size that misses, upper size that reaches)."""
    rec = Recommend(_names(policy), _time(start), _time(end), cache_groups=_names(cache_group), metric=metric,
                    target=target, fraction_of_optimum=fraction_of_optimum if target is None else None,
                    min_size=_sizes(min_size)[0], max_size=_sizes(max_size)[0], sample_rate=sample_rate)
    if rec.target is None and rec.fraction_of_optimum is None:
        rec.fraction_of_optimum = 0.8
    answer = _recommend(connect(store), rec)
    return pd.DataFrame([{"policy": r["policy"], "reached": r["reached"], "smallest_size_bytes": r["smallest_size_bytes"],
                          "efficiency": r["value_at_size"], "goal": answer["goal"],
                          **{k: v for k, v in r["bracket"].items()}, "method": r["method"]}
                         for r in answer["recommendations"]])


def _read(fn):
    """A read-layer function taking a store path or URL and ISO strings as well."""

    @functools.wraps(fn)
    def call(store, *args, **kw):
        args = [_time(a) if isinstance(a, str) and i < 2 else a for i, a in enumerate(args)]
        kw = {k: _time(v) if k in ("start", "end") and isinstance(v, str) else v for k, v in kw.items()}
        return fn(connect(store), *args, **kw)

    return call


def __getattr__(name: str):
    if name in READS:
        return _read(getattr(reads, name))
    raise AttributeError(f"module 'cachescope.notebook' has no attribute {name!r}")
