"""GET /v1/efficiency: hit and transfer efficiency series from the table of the step."""

from __future__ import annotations

import datetime as dt
from typing import Optional

import numpy as np
import orjson
from fastapi import APIRouter, Request, Query, Response
from starlette.concurrency import run_in_threadpool

from api import params as P
from api import series_index, stream
from api.budget import check_points
from api.deps import AnswersDep, SeriesDep, SettingsDep, StoresDep, require
from api.models import ERRORS, EfficiencyAnswer
from cachescope import reads

router = APIRouter(tags=["efficiency"])

SERIES_KEY = ("cache_group", "policy", "size_bytes", "tier_key")
#: delayed hits beside hits (issue 36): reads that waited for blocks in flight, not hits; 0 unless an
#: xcache shadow has fetch times
COUNTS = ("requests", "hits", "bytes_requested", "bytes_hit", "delayed_hits", "bytes_delayed")


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
async def efficiency(
    request: Request,
    stores: StoresDep,
    settings: SettingsDep,
    answers: AnswersDep,
    copies: SeriesDep,
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
    def compute(store, copy: Optional[series_index.TableCopy]):
        start, end = P.time_range(store, from_, to)
        step_s = P.step_seconds(step, start, end)
        groups = P.groups_of(store, cache_group, site)
        tiers = P.split(tier)
        filters = dict(cache_groups=groups, policies=P.split(policy), sizes=P.sizes(size), tiers=tiers,
                       by_tier=by_tier or bool(tiers))
        answer = {"step": step, "table": reads.table_for_step(step_s), "from": start.isoformat(), "to": end.isoformat()}
        # hour and day steps: the in-process copy of the table (the same answer, no query)
        if copy is None:
            copy = copies.copy_of(store, answer["table"])
        if copy is not None:
            check_points(settings, start, end, step_s, series=copy.series_count(start, end, **filters), step=step)
            answer["series"] = copy.series_json(start, end, step_s, **filters)
            if store is not None:
                _no_typo(store, answer["series"], filters)
            return _answer(request, answer, series_index.DUMPS_OPTION)
        # sized before it is asked for: a refusal costs one small query, not the answer
        series, tier_series, window_s = reads.series_scope(
            store, start, end, **{k: filters[k] for k in ("cache_groups", "policies", "sizes", "tiers")})
        check_points(settings, start, end, step_s, series=tier_series if filters["by_tier"] else series,
                     tier_series=tier_series, minute_window_s=window_s, step=step)
        answer["series"] = columnar_series(reads.efficiency_series(store, start, end, step_s, **filters))
        _no_typo(store, answer["series"], filters)
        return _answer(request, answer, orjson.OPT_SERIALIZE_NUMPY)

    def with_store():
        with stores.get() as store:
            return compute(store, None)

    if from_ is not None and to is not None and not site:
        # nothing to ask the store (the range is given, no site to look up) and the copy was checked
        # less than a second ago: answered on the event loop, no thread hop (about 1 ms of numpy)
        copy = copies.fresh(_table_of(step))
        # a name the copy lacks may be a typo: the threaded path asks the store
        if copy is not None and copy.knows(cache_groups=P.split(cache_group), policies=P.split(policy),
                                           tiers=P.split(tier)):
            if answers.quick(request):
                return answers.get(request, lambda: compute(None, copy))
            # a kept answer to gzip first (156 ms for 14.5 MB on one core) or one in flight: in a
            # thread, so the event loop (and /healthz) does not wait for it
            return await run_in_threadpool(answers.get, request, lambda: compute(None, copy))
    return await run_in_threadpool(answers.get, request, with_store)


def _answer(request: Request, answer: dict, option: int) -> Response:
    """A large answer streamed in pieces (api/stream.py: the same bytes, never whole in memory),
    a smaller one whole (kept by the answer cache, its gzip shared). As a whole answer, the first
    request's goes out as computed (gzip costs more CPU than sending it on a fast link); the
    requests that joined it share one gzip."""
    if sum(len(s["time"]) for s in answer["series"]) > stream.STREAM_POINTS:
        return stream.answer(answer, "series", option, gz=False)
    return Response(orjson.dumps(answer, option=option), media_type="application/json")


def _no_typo(store, series: list[dict], filters: dict) -> None:
    """A filter value that selected nothing is a 422 when the store holds nothing of that name
    (a typo answered with an empty list would read as a cache that did nothing)."""
    for field, key, asked in (("cache_group", "cache_group", filters["cache_groups"]),
                              ("policy", "policy", filters["policies"]), ("tier", "tier", filters["tiers"])):
        if asked:
            seen = {s[key] for s in series}
            P.check_names(store, field, [v for v in asked if v not in seen])


def _table_of(step: str) -> Optional[str]:
    try:
        return reads.table_for_step(P.parse_duration_us(step) // 1_000_000)
    except ValueError:
        return None  # a bad step: the threaded path names it
