"""Recommendations: per policy, the smallest cache size reaching a target efficiency, to within
1 % of the exact smallest size, with the bracket that proves it.

* LRU: the exact curve in one pass (the engine's `LruMrc`, byte-weighted stack distances) over
  sizes 1 % apart from min to max: the first size reaching the target is the answer, the size
  before it misses.
* every other policy: a bracketing search over what-if passes. A first pass replays every
  policy on a log grid of sizes (the curve), belady on it (the bound) and an infinite cache (the
  optimum); then each pass replays, for every policy not yet settled, `SIZES_PER_PASS` sizes
  log-spaced inside its bracket (a lower size that misses, an upper size that reaches), until
  upper ≤ 1.01 × lower. That is bisection with several sizes per pass: the same answer, fewer
  replays. It assumes efficiency grows with size (true of LRU and belady; policies with
  Bélády's anomaly, FIFO for one, can reach the target at a size and miss it just above: the
  answer is then a size that reaches, with a smaller one that misses, not necessarily the smallest).

Efficiency is hit efficiency (hits / reads) or transfer efficiency (bytes hit / bytes read), as
`metric` says; the JSON names them `hit_ratio` / `byte_hit_ratio`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Literal, Sequence

import numpy as np

from cachescope import reads
from cachescope.replay import CHUNK_ROWS, WhatIf, WhatIfError, WhatIfResult, run_whatif
from cachescope.simulation import LruCurve, log_grid

#: bytes: more than any working set (the engine's largest capacity): every re-access hits
INFINITE = 2**63 - 1
TB = 10**12
#: the answer's size is within this fraction above the exact smallest size
TOLERANCE = 0.01
#: sizes per policy in each search pass after the first
SIZES_PER_PASS = 8
#: sizes of the LRU exact curve at most (1 % apart covers a ratio of 1.01^4096 ≈ 4·10¹⁷)
MAX_LRU_POINTS = 4096


class Unreachable(WhatIfError):
    """No policy reaches the target at the largest size asked."""


@dataclass
class Recommend:
    """One sizing question over the stored accesses of [start, end)."""

    policies: Sequence[str]
    start: dt.datetime
    end: dt.datetime
    cache_groups: Sequence[str] = ()
    sites: Sequence[str] = ()
    metric: Literal["hit", "transfer"] = "transfer"
    #: an absolute efficiency to reach (0–1), or a fraction of the optimum (an infinite cache)
    target: float | None = None
    fraction_of_optimum: float | None = None
    min_size: int = TB
    max_size: int = 1000 * TB
    #: sizes of the first pass's log grid (the curve in the answer)
    points: int = 10
    sample_rate: float = 1.0
    tolerance: float = TOLERANCE

    @property
    def key(self) -> str:
        return "hit_ratio" if self.metric == "hit" else "byte_hit_ratio"


@dataclass
class Search:
    """One policy's bracket: `lower` misses the goal (None: min_size reaches it), `upper` reaches it."""

    policy: str
    points: dict[int, dict] = field(default_factory=dict)  # size → counters and efficiencies
    passes: int = 0

    def bracket(self, goal: float, key: str) -> tuple[int | None, int | None]:
        sizes = sorted(self.points)
        upper = next((s for s in sizes if self.points[s][key] >= goal), None)
        below = [s for s in sizes if upper is None or s < upper]
        return (below[-1] if below else None), upper

    def settled(self, goal: float, key: str, tolerance: float) -> bool:
        lower, upper = self.bracket(goal, key)
        return upper is None or lower is None or upper <= lower * (1 + tolerance) or upper - lower <= 1


def _point(a: dict) -> dict:
    return {k: a[k] for k in ("requests", "hits", "hit_ratio", "bytes_requested", "bytes_hit", "byte_hit_ratio")}


def _between(lower: int, upper: int, n: int) -> list[int]:
    """n sizes log-spaced strictly inside (lower, upper), whole bytes, deduplicated."""
    inner = {int(round(x)) for x in np.geomspace(lower, upper, n + 2)[1:-1]}
    return sorted(s for s in inner if lower < s < upper)


def recommend(store, rec: Recommend, *, run: Callable[[WhatIf], WhatIfResult] | None = None,
              slot: Callable[[], ContextManager] = contextlib.nullcontext) -> dict:
    """The answer of `GET /v1/recommend` and `cachescope whatif --recommend`. `run` replays one
    what-if and `slot` holds the LRU curve's pass (the API passes its bounded runner and its
    concurrency slot); raises Unreachable when no policy reaches the goal."""
    run = run or (lambda req: run_whatif(store, req))
    if rec.max_size <= rec.min_size:
        raise WhatIfError("max_size", "max_size must be above min_size")
    if (rec.target is None) == (rec.fraction_of_optimum is None):
        raise WhatIfError("target", "give target or fraction_of_optimum, one of them")
    key = rec.key
    grid = log_grid(rec.min_size, rec.max_size, rec.points)
    searched = [p for p in dict.fromkeys(rec.policies) if p != "lru"]

    def whatif(pairs: list[tuple[str, int]]) -> list[dict]:
        req = WhatIf(list(dict.fromkeys(p for p, _ in pairs)), sorted({s for _, s in pairs}), rec.start, rec.end,
                     cache_groups=rec.cache_groups, sites=rec.sites, sample_rate=rec.sample_rate, pairs=pairs)
        return run(req).answers()

    first = whatif([(p, s) for p in dict.fromkeys(searched + ["belady"]) for s in grid] + [("lru", INFINITE)])
    optimum = _point(first[-1])
    if optimum[key] is None:  # nothing read (or no byte read): no efficiency to reach
        raise WhatIfError("from", "no stored reads in this range (and cache groups): nothing to size a cache for")
    goal = rec.target if rec.target is not None else rec.fraction_of_optimum * optimum[key]
    label = (f"{rec.metric} efficiency ≥ {rec.target:g}" if rec.target is not None else
             f"{rec.metric} efficiency ≥ {rec.fraction_of_optimum:g} × optimum {optimum[key]:.4f} = {goal:.4f}")
    belady = [_point(a) | {"size_bytes": a["size_bytes"]} for a in first if a["policy"] == "belady"]

    searches = {p: Search(p) for p in searched}
    for a in first[:-1]:
        if a["policy"] in searches:
            searches[a["policy"]].points[a["size_bytes"]] = _point(a)
    for s in searches.values():
        s.passes = 1
    while True:
        todo = {p: s for p, s in searches.items() if not s.settled(goal, key, rec.tolerance)}
        if not todo:
            break
        pairs = []
        for p, s in todo.items():
            lower, upper = s.bracket(goal, key)
            pairs += [(p, size) for size in _between(lower, upper, SIZES_PER_PASS)]
        for a in whatif(pairs):
            searches[a["policy"]].points[a["size_bytes"]] = _point(a)
        for s in todo.values():
            s.passes += 1
    if "lru" in rec.policies:
        with slot():
            searches["lru"] = lru_exact(store, rec, grid)

    recs = []
    for p in dict.fromkeys(rec.policies):
        s = searches[p]
        recs.append(_recommendation(s, grid, goal, key, label, rec, exact=p == "lru"))
    if not any(r["reached"] for r in recs):
        best = max(recs, key=lambda r: r["bracket"]["lower_value"] or 0.0)
        raise Unreachable("target", f"no policy reaches {label} at max_size {rec.max_size} bytes (best: "
                                    f"{best['policy']} at {best['bracket']['lower_value']:.4f}): raise max_size or "
                                    "lower the target", status=422)
    return {"method": _method(rec, grid), "optimum": {"hit_ratio": optimum["hit_ratio"],
                                                      "byte_hit_ratio": optimum["byte_hit_ratio"], "belady": belady},
            "goal": goal, "recommendations": recs}


def _recommendation(s: Search, grid: list[int], goal: float, key: str, label: str, rec: Recommend, exact: bool) -> dict:
    lower, upper = s.bracket(goal, key)
    if upper is None:  # not reached: the bracket's lower end is the largest size tried
        lower = max(s.points)
    at = s.points[upper] if upper is not None else None
    saved = None
    above = [g for g in grid if upper is not None and g > upper]
    if above and above[0] in s.points:
        nxt = s.points[above[0]]
        saved = (nxt["bytes_hit"] - at["bytes_hit"]) / ((above[0] - upper) / TB)
    return {
        "policy": s.policy, "target": label, "reached": upper is not None,
        "smallest_size_bytes": upper, "value_at_size": at[key] if at else None,
        "wan_bytes_saved_per_extra_tb": saved,
        "method": ("exact LRU curve (one pass, byte-weighted stack distances) at sizes "
                   f"{rec.tolerance * 100:g} % apart" if exact else
                   f"bracketing search over what-if passes ({SIZES_PER_PASS} sizes per pass inside the bracket) "
                   f"until upper ≤ {1 + rec.tolerance:g} × lower"),
        "bracket": {"lower_size_bytes": lower, "lower_value": s.points[lower][key] if lower is not None else None,
                    "upper_size_bytes": upper, "upper_value": at[key] if at else None, "passes": s.passes,
                    "tolerance": rec.tolerance},
        "curve": [{"size_bytes": g, "hit_ratio": s.points[g]["hit_ratio"], "byte_hit_ratio": s.points[g]["byte_hit_ratio"],
                   "bytes_hit": s.points[g]["bytes_hit"]} for g in grid if g in s.points],
    }


def _method(rec: Recommend, grid: list[int]) -> str:
    return (f"per policy the smallest size from {rec.min_size} to {rec.max_size} bytes reaching the target, within "
            f"{rec.tolerance * 100:g} % above the exact smallest size: LRU from its exact one-pass curve, the others by a "
            f"bracketing search over what-if passes (a first pass on {len(grid)} log-spaced sizes, then "
            f"{SIZES_PER_PASS} sizes per pass inside each bracket), cold caches at `from`"
            + (f", SHARDS-sampled at rate {rec.sample_rate:.4g}" if rec.sample_rate < 1 else "")
            + "; the optimum is an infinite cache (every re-access hits: what belady reaches with the working set); "
              "WAN bytes saved per extra TB is the slope of bytes hit from the answer to the next grid size")


def lru_sizes(rec: Recommend, grid: Sequence[int]) -> list[int]:
    """Sizes of the exact LRU curve: the grid, and sizes at most `tolerance` apart from min to max."""
    n = min(MAX_LRU_POINTS, math.ceil(math.log(rec.max_size / rec.min_size) / math.log1p(rec.tolerance)) + 1)
    return sorted({*grid, *log_grid(rec.min_size, rec.max_size, n)})


def lru_exact(store, rec: Recommend, grid: Sequence[int]) -> Search:
    """The exact LRU curve over the range's stored accesses at lru_sizes, in one pass of the engine."""
    sizes = lru_sizes(rec, grid)
    curve = LruCurve(sizes, 1, rec.sample_rate)
    day = dt.timedelta(days=1)
    a = rec.start
    while a < rec.end:
        b = min(a + day, rec.end)
        for cols in reads.whatif_feed_chunks(store, a, b, tier_names=[], cache_groups=rec.cache_groups,
                                             sites=rec.sites, rows=CHUNK_ROWS):
            curve.feed(cols["file_id"], cols["file_size"], cols["bytes_read"],
                       np.zeros(len(cols["file_id"]), np.uint8), cols["op_code"])
        a = b
    s = Search("lru", passes=1)
    for p in curve.points():
        s.points[p["capacity_bytes"]] = {k: p[k] for k in ("requests", "hits", "hit_ratio", "bytes_requested",
                                                            "bytes_hit", "byte_hit_ratio")}
    return s
