"""GET /v1/mrc: the stored exact (or sampled) LRU miss-ratio curves of a group and range."""

from __future__ import annotations

import datetime as dt
from typing import Optional

from fastapi import APIRouter, Request, Query

from api import params as P
from api.deps import AnswersDep, StoreDep, require
from api.models import ERRORS, MrcAnswer
from cachescope import reads

router = APIRouter(tags=["mrc"])


@router.get("/mrc", response_model=MrcAnswer, responses=ERRORS, dependencies=[require("read")])
def mrc(
    request: Request,
    store: StoreDep,
    answers: AnswersDep,
    site: Optional[str] = Query(None, max_length=200),
    cache_group: list[str] = Query([], description="cache groups (summed); all by default"),
    tier: list[str] = Query([], description="tiers (implies by_tier)"),
    by_tier: bool = Query(False, description="one curve per tier beside ALL"),
    from_: Optional[dt.datetime] = Query(None, alias="from"),
    to: Optional[dt.datetime] = Query(None),
):
    """Hit and transfer efficiency against capacity (LRU, one pass of the live pipeline's curve): the points
    carry them as `hit_ratio` and `byte_hit_ratio`, the names of every curve in the JSON contracts."""
    def compute():
        start, end = P.time_range(store, from_, to)
        groups = P.groups_of(store, cache_group, site)
        tiers = P.split(tier)
        P.check_names(store, "cache_group", groups)
        P.check_names(store, "tier", tiers)
        curves: dict[str, list] = {}
        rate = None
        frames = [reads.mrc(store, start, end, cache_groups=groups, tiers=tiers, by_tier=False)]
        if by_tier or tiers:
            frames.append(reads.mrc(store, start, end, cache_groups=groups, tiers=tiers, by_tier=True))
        for df in frames:
            if not len(df):
                continue
            rate = float(df["sample_rate"].max())
            df = df.rename(columns=reads.CONTRACT_NAMES)
            values = {c: P.floats(df[c]) for c in ("requests", "hits", "bytes_requested", "bytes_hit",
                                                   *reads.CONTRACT_NAMES.values())}
            for i, (key, cap) in enumerate(zip(df["tier_key"].tolist(), df["capacity_bytes"].tolist())):
                curves.setdefault(str(key), []).append({"capacity_bytes": int(cap),
                                                        **{c: v[i] for c, v in values.items()}})
        return P.json_response({"policy": "lru", "from": start.isoformat(), "to": end.isoformat(), "sample_rate": rate,
                                "curves": curves})

    return answers.get(request, compute)
