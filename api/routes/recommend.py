"""GET /v1/recommend: per policy, the smallest size reaching a target (within 1 % of the exact
smallest size: cachescope/recommend.py), the bracket that shows it, and what each extra TB saves."""

from __future__ import annotations

import datetime as dt
from typing import Literal, Optional

from fastapi import APIRouter, Query

from api import params as P
from api.deps import LimitsDep, StoreDep, require
from api.errors import ApiError
from api.models import ERRORS, RecommendAnswer
from cachescope.recommend import Recommend, recommend as run_recommend
from cachescope.replay import WhatIf, WhatIfError, scope
from cachescope.simulation import POLICIES

router = APIRouter(tags=["recommend"])


@router.get("/recommend", response_model=RecommendAnswer, responses=ERRORS, dependencies=[require("whatif")])
def recommend(
    store: StoreDep,
    limits: LimitsDep,
    cache_group: list[str] = Query([], description="cache groups (merged as one cache); all by default"),
    site: Optional[str] = Query(None, max_length=200),
    from_: Optional[dt.datetime] = Query(None, alias="from"),
    to: Optional[dt.datetime] = Query(None),
    policy: list[str] = Query(["lru", "arc", "s3fifo"], description="policies to size"),
    metric: Literal["hit", "transfer"] = Query("transfer", description="hit efficiency or transfer efficiency"),
    target: Optional[float] = Query(None, gt=0, le=1, description="an absolute efficiency to reach (0–1)"),
    fraction_of_optimum: Optional[float] = Query(None, gt=0, le=1,
                                                 description="a fraction of the optimum (infinite cache) to reach"),
    min_size: str = Query("1TB", max_length=40),
    max_size: str = Query("1PB", max_length=40),
    points: int = Query(10, ge=2, le=24, description="sizes of the first pass's log grid (the curve)"),
    sample_rate: Optional[float] = Query(None, gt=0, le=1, description="SHARDS rate; default: all files up to "
                                         "5 M accesses, fewer above"),
):
    policies = [p.lower() for p in P.split(policy)]
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        raise ApiError(422, "policy", f"unknown policy {', '.join(bad) or '(none)'}; known: {', '.join(POLICIES)}")
    if target is not None and fraction_of_optimum is not None:
        raise ApiError(422, "target", "give target or fraction_of_optimum, not both")
    if target is None and fraction_of_optimum is None:
        fraction_of_optimum = 0.8
    lo, hi = P.one_capacity(min_size, "min_size"), P.one_capacity(max_size, "max_size")
    if hi <= lo:
        raise ApiError(422, "max_size", "max_size must be above min_size")
    start, end = P.time_range(store, from_, to)
    groups = P.groups_of(store, cache_group, site)
    P.check_names(store, "cache_group", groups)
    if sample_rate is None:
        n = scope(store, WhatIf(["lru"], [1], start, end, cache_groups=groups))[0]
        sample_rate = 1.0 if n <= 5_000_000 else max(0.01, 5_000_000 / n)
    rec = Recommend(policies, start, end, cache_groups=groups, metric=metric, target=target,
                    fraction_of_optimum=fraction_of_optimum, min_size=lo, max_size=hi, points=points,
                    sample_rate=sample_rate)
    try:
        answer = run_recommend(store, rec, run=lambda req: limits.run(store, req, where="query"),
                               slot=lambda: limits.slot("query"))
    except WhatIfError as e:
        raise ApiError(e.status, e.field, str(e), "query") from None
    return P.json_response({"cache_group": groups, "from": start.isoformat(), "to": end.isoformat(), **answer})
