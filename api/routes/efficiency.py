"""GET /v1/efficiency: hit and transfer efficiency series from the table of the step."""

from __future__ import annotations

import datetime as dt
from typing import Optional

import numpy as np
from fastapi import APIRouter, Depends, Request, Query

from api import params as P
from api.deps import get_store, require
from api.models import ERRORS, EfficiencyAnswer
from cachescope import reads

router = APIRouter(tags=["efficiency"])

SERIES_KEY = ("cache_group", "policy", "size_bytes", "tier_key")
COUNTS = ("requests", "hits", "bytes_requested", "bytes_hit")


def columnar_series(df) -> list[dict]:
    """Rows sorted by series key → one columnar object per series."""
    if not len(df):
        return []
    keys = [df[k].to_numpy() for k in SERIES_KEY]
    change = np.zeros(len(df), dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    bounds = np.append(np.flatnonzero(change), len(df)).tolist()
    times = P.iso(df["time"])
    cols = {c: df[c].to_numpy().tolist() for c in COUNTS}
    eff = {c: P.floats(df[c]) for c in ("hit_efficiency", "transfer_efficiency")}
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        s = {"cache_group": str(keys[0][a]), "policy": str(keys[1][a]), "size_bytes": int(keys[2][a]),
             "tier": str(keys[3][a]), "time": times[a:b]}
        for c, v in cols.items():
            s[c] = v[a:b]
        for c, v in eff.items():
            s[c] = v[a:b]
        out.append(s)
    return out


@router.get("/efficiency", response_model=EfficiencyAnswer, responses=ERRORS, dependencies=[require("read")])
def efficiency(
    request: Request,
    store=Depends(get_store),
    site: Optional[str] = Query(None, max_length=200, description="the cache groups of this site"),
    cache_group: list[str] = Query([], description="cache groups (repeat or comma-separate); all by default"),
    policy: list[str] = Query([], description="policies; all by default"),
    size: list[str] = Query([], description="sizes: 10TB, 10TiB or bytes; all by default"),
    tier: list[str] = Query([], description="tiers (implies by_tier); all by default"),
    by_tier: bool = Query(False, description="one series per tier instead of all tiers together"),
    from_: Optional[dt.datetime] = Query(None, alias="from", description="ISO-8601; default: start of the results"),
    to: Optional[dt.datetime] = Query(None, description="ISO-8601; default: end of the results"),
    step: str = Query("1h", max_length=20, description="bucket length: 1m, 1h, 1d (picks the minute, hour or day table)"),
):
    """Hit efficiency (hits/requests) and transfer efficiency (bytes hit/bytes requested) per bucket."""
    def compute():
        start, end = P.time_range(store, from_, to)
        step_s = P.step_seconds(step, start, end)
        groups = P.groups_of(store, cache_group, site)
        tiers = P.split(tier)
        filters = dict(cache_groups=groups, policies=P.split(policy), sizes=P.sizes(size), tiers=tiers,
                       by_tier=by_tier or bool(tiers))
        # hour and day steps: the in-process copy of the table (the same answer, no query)
        series = request.app.state.series.series_json(store, start, end, step_s, **filters)
        if series is None:
            series = columnar_series(reads.efficiency_series(store, start, end, step_s, **filters))
        return P.json_response({"step": step, "table": reads.table_for_step(step_s), "from": start.isoformat(),
                                "to": end.isoformat(), "series": series})

    return request.app.state.answers.get(request, compute)
