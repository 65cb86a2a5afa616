"""GET /v1/recommend: per policy, the smallest size reaching a target, and what each extra TB saves.

One what-if pass of the engine's bank answers a log grid of sizes for every policy, plus an
infinite cache (every re-access a hit: the most any cache can do, which the offline optimum
`belady` reaches once it holds the working set) and `belady` on the grid.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal, Optional

from fastapi import APIRouter, Depends, Query, Request

from api import params as P
from api.deps import get_store, require
from api.errors import ApiError
from api.models import ERRORS, RecommendAnswer
from cachescope.replay import WhatIf
from cachescope.simulation import POLICIES, log_grid

router = APIRouter(tags=["recommend"])

INFINITE = 2**63 - 1  # bytes: more than any working set (the engine's largest capacity)
TB = 10**12


@router.get("/recommend", response_model=RecommendAnswer, responses=ERRORS, dependencies=[require("whatif")])
def recommend(
    request: Request,
    store=Depends(get_store),
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
    points: int = Query(10, ge=2, le=24, description="sizes on the log grid"),
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
    grid = log_grid(lo, hi, points)
    limits = request.app.state.limits
    if sample_rate is None:
        from cachescope.replay import scope

        n = scope(store, WhatIf(["lru"], [1], start, end, cache_groups=groups))[0]
        sample_rate = 1.0 if n <= 5_000_000 else max(0.01, 5_000_000 / n)
    run_policies = list(dict.fromkeys(policies + ["belady"]))
    req = WhatIf(run_policies, grid, start, end, cache_groups=groups, sample_rate=sample_rate)
    res = limits.run(store, req, where="query")
    inf = limits.run(store, WhatIf(["lru"], [INFINITE], start, end, cache_groups=groups, sample_rate=sample_rate),
                     where="query").answers()[0]
    key = "hit_ratio" if metric == "hit" else "byte_hit_ratio"
    answers = res.answers()
    by_policy: dict[str, list[dict]] = {}
    for a in answers:
        by_policy.setdefault(a["policy"], []).append(a)
    goal = target if target is not None else fraction_of_optimum * inf[key]
    label = (f"{metric} efficiency ≥ {target:g}" if target is not None else
             f"{metric} efficiency ≥ {fraction_of_optimum:g} × optimum {inf[key]:.4f} = {goal:.4f}")
    recs = []
    for p in policies:
        curve = by_policy[p]
        reached = [i for i, a in enumerate(curve) if a[key] >= goal]
        i = reached[0] if reached else None
        saved = None
        if i is not None and i + 1 < len(curve):
            saved = (curve[i + 1]["bytes_hit"] - curve[i]["bytes_hit"]) / ((curve[i + 1]["size_bytes"] - curve[i]["size_bytes"]) / TB)
        recs.append({"policy": p, "target": label, "reached": i is not None,
                     "smallest_size_bytes": curve[i]["size_bytes"] if i is not None else None,
                     "value_at_size": curve[i][key] if i is not None else None,
                     "wan_bytes_saved_per_extra_tb": saved,
                     "curve": [{"size_bytes": a["size_bytes"], "hit_ratio": a["hit_ratio"],
                                "byte_hit_ratio": a["byte_hit_ratio"], "bytes_hit": a["bytes_hit"]} for a in curve]})
    method = (f"one what-if pass over the stored accesses of the range, cold caches at `from`: {len(run_policies)} policies "
              f"× {len(grid)} log-spaced sizes from {lo} to {hi} bytes"
              + (f", SHARDS-sampled at rate {sample_rate:.4g}" if sample_rate < 1 else "")
              + "; the optimum is an infinite cache (every re-access hits: what belady reaches with the working set); "
              "the answer is the smallest grid size reaching the target; WAN bytes saved per extra TB is the slope "
              "of bytes hit to the next grid size")
    return P.json_response({"cache_group": groups, "from": start.isoformat(), "to": end.isoformat(), "method": method,
                            "optimum": {"hit_ratio": inf["hit_ratio"], "byte_hit_ratio": inf["byte_hit_ratio"],
                                        "belady": [{"size_bytes": a["size_bytes"], "hit_ratio": a["hit_ratio"],
                                                    "byte_hit_ratio": a["byte_hit_ratio"]} for a in by_policy["belady"]]},
                            "recommendations": recs})
