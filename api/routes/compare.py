"""GET /v1/compare: the real cache's observed transfer (and hit) efficiency beside shadows of its size.

The shadows are the stored series of every policy the pipeline runs at that size, and the
`xcache` model: stored when the pipeline runs it at that size, else replayed from the stored
accesses (a what-if pass bucketed by the step). Difference = shadow − observed.

The real cache's transfer efficiency is exact when every access's record carries the bytes it
fetched from the origin (XRootD >= 5.7.2's b_todisk): a hit serves all its bytes from the cache, a
miss its bytes read − min(bytes read, origin bytes). Otherwise (5.5 with prefetch) it is a range,
`observed_transfer_efficiency_low` (hits by the cache's verdict) .. `_high` (b_hit, the value of
`observed_transfer_efficiency` then), flagged `observed_transfer_efficiency_approximate`. WAN bytes:
the real cache's bytes from the origin (b_todisk + b_bypass) beside each shadow's (miss bytes; the
xcache model's fetched blocks), and the WAN saving 1 − WAN bytes / bytes read.
"""

from __future__ import annotations

import datetime as dt
from typing import Optional

import numpy as np
import orjson
from fastapi import APIRouter, Query, Request

from api import params as P
from api import stream
from api.budget import check_points
from api.deps import AnswersDep, LimitsDep, ScopesDep, SettingsDep, StoreDep, require
from api.errors import ApiError
from api.models import ERRORS, CompareAnswer
from cachescope.replay import F, WhatIf
from cachescope import reads

router = APIRouter(tags=["compare"])


def _eff(hit: float, total: float) -> float | None:
    return hit / total if total else None


#: the real cache's sums per bucket (reads.OBSERVED_SERIES' columns)
_OBS_COLUMNS = ("hit_bytes", "miss_bytes", "bypass_bytes", "hits", "accesses", "bytes_read", "cache_bytes_low",
                "cache_bytes_high", "origin_accesses", "origin_bytes", "origin_bytes_read")
_NO = len(_OBS_COLUMNS)
#: a shadow's sums per bucket: bytes hit, bytes requested, hits, requests, WAN bytes, delayed hits
_NS = 6


def _xcache_wan(c: np.ndarray) -> int:
    """The xcache model's bytes from the origin (reads._SHADOW_WAN): the blocks it fetched."""
    return int(max(int(c[F["bytes_filled"]]), int(c[F["bytes_requested"]]) - int(c[F["bytes_hit"]])))


@router.get("/compare", response_model=CompareAnswer, responses=ERRORS, dependencies=[require("read")])
def compare(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    limits: LimitsDep,
    answers: AnswersDep,
    scopes: ScopesDep,
    cache_group: str = Query(..., max_length=200, description="the real cache's group"),
    size: str = Query(..., max_length=40, description="the real cache's size: 10TB, 10TiB or bytes"),
    from_: Optional[dt.datetime] = Query(None, alias="from"),
    to: Optional[dt.datetime] = Query(None),
    step: str = Query("1h", max_length=20, description="window length: 1h, 1d, …"),
    xcache: bool = Query(True, description="include the `xcache` model (replayed when not stored)"),
):
    """Per window and overall: observed transfer efficiency (hit bytes / all bytes the real cache
    served), each shadow's transfer efficiency (bytes hit / bytes requested) and the difference."""
    def compute():
        size_b = P.one_capacity(size, "size")
        start, end = P.time_range(store, from_, to)
        step_s = P.step_seconds(step, start, end)
        P.check_names(store, "cache_group", [cache_group])
        # the shadows stored at this size, the real cache and the xcache replay: sized before asked for
        series, tier_series, window_s = reads.series_scope(store, start, end, cache_groups=[cache_group], sizes=[size_b])
        check_points(settings, start, end, step_s, series=series + 2,
                     tier_series=2 * tier_series, minute_window_s=window_s, step=step)
        obs = reads.observed_series(store, start, end, step_s, cache_groups=[cache_group])
        shadow = reads.efficiency_series(store, start, end, step_s, cache_groups=[cache_group], sizes=[size_b])
        ages = reads.residence_series(store, start, end, step_s, cache_groups=[cache_group], sizes=[size_b])
        # time bucket → values
        buckets: dict[str, dict] = {}
        overall_obs = [0] * _NO
        cols = [obs[c].tolist() for c in _OBS_COLUMNS] if len(obs) else [[] for _ in _OBS_COLUMNS]
        for t, *v in zip(P.iso(obs["time"]) if len(obs) else [], *cols):
            b = buckets.setdefault(t, {"obs": [0] * _NO, "shadow": {}})
            for i in range(_NO):
                b["obs"][i] += int(v[i])
                overall_obs[i] += int(v[i])
        source: dict[str, str] = {}
        overall_sh: dict[str, list[int]] = {}
        if len(shadow):
            for t, pol, *v in zip(P.iso(shadow["time"]), shadow["policy"].tolist(), shadow["bytes_hit"].tolist(),
                                  shadow["bytes_requested"].tolist(), shadow["hits"].tolist(),
                                  shadow["requests"].tolist(), shadow["wan_bytes"].tolist(),
                                  shadow["delayed_hits"].tolist()):
                source[str(pol)] = "stored"
                acc = buckets.setdefault(t, {"obs": [0] * _NO, "shadow": {}})["shadow"].setdefault(str(pol), [0] * _NS)
                tot = overall_sh.setdefault(str(pol), [0] * _NS)
                for i in range(_NS):
                    acc[i] += int(v[i])
                    tot[i] += int(v[i])
        note = ""
        may_replay = "whatif" in scopes
        if xcache and "xcache" not in source and not may_replay:
            note = "xcache is not stored at this size and this token lacks the whatif scope to replay it"
        if xcache and "xcache" not in source and may_replay:
            res = limits.run(store, WhatIf(["xcache"], [size_b], start, end, cache_groups=[cache_group],
                                                             step_s=step_s), where="query")
            source["xcache"] = "whatif"
            note = "xcache replayed from the stored accesses with cold caches at `from` (no warm-up)"
            per = res.counters[:, :, 0].sum(axis=(1, 2))  # (buckets, fields)
            for i in np.flatnonzero(per[:, F["requests"]]).tolist():
                t = (start + dt.timedelta(seconds=i * step_s)).isoformat()
                acc = buckets.setdefault(t, {"obs": [0] * _NO, "shadow": {}})["shadow"].setdefault("xcache", [0] * _NS)
                for k, f in enumerate(("bytes_hit", "bytes_requested", "hits", "requests")):
                    acc[k] += int(per[i, F[f]])
                acc[4] += _xcache_wan(per[i])
                acc[5] += int(per[i, F["delayed_hits"]])
            tot = per.sum(axis=0)
            overall_sh["xcache"] = [int(tot[F[f]]) for f in ("bytes_hit", "bytes_requested", "hits", "requests")]
            overall_sh["xcache"] += [_xcache_wan(tot), int(tot[F["delayed_hits"]])]
        # how long data stays in each stored shadow (mean age of its files as the bucket's reads found them)
        age_sums: dict[str, dict[str, list[int]]] = {}
        if len(ages):
            for t, pol, a, n in zip(P.iso(ages["time"]), ages["policy"].tolist(), ages["resident_age_s"].tolist(),
                                    ages["age_reads"].tolist()):
                acc = age_sums.setdefault(t, {}).setdefault(str(pol), [0, 0])
                acc[0] += int(a)
                acc[1] += int(n)
        if not buckets and not source:
            raise ApiError(422, "cache_group", f"no observations or shadow results for cache group {cache_group!r} "
                                               f"at size {size_b} in this range")

        def point(t: str, o: list[int], sh: dict[str, list[int]]) -> dict:
            q = dict(zip(_OBS_COLUMNS, o))
            served = q["hit_bytes"] + q["miss_bytes"] + q["bypass_bytes"]
            real = reads.real_cache_totals(q)
            oe = real["transfer_efficiency"]
            se = {p: _eff(v[0], v[1]) for p, v in sorted(sh.items())}
            # hit efficiency: the real cache's accesses it fetched nothing for from the origin / its accesses
            return {"time": t, "observed_transfer_efficiency": oe, "observed_bytes": served, "shadow": se,
                    "difference": {p: (None if v is None or oe is None else v - oe) for p, v in se.items()},
                    "observed_hit_efficiency": _eff(q["hits"], q["accesses"]), "observed_accesses": q["accesses"],
                    "shadow_hit_efficiency": {p: _eff(v[2], v[3]) for p, v in sorted(sh.items())},
                    "shadow_delayed_hits": {p: v[5] for p, v in sorted(sh.items())},
                    "observed_transfer_efficiency_low": real["transfer_efficiency_low"],
                    "observed_transfer_efficiency_high": real["transfer_efficiency_high"],
                    "observed_transfer_efficiency_approximate": real["transfer_efficiency_approximate"],
                    "observed_origin_accesses": real["origin_accesses"], "observed_origin_bytes": real["origin_bytes"],
                    "observed_wan_saving": real["wan_saving"],
                    "shadow_wan_bytes": {p: v[4] for p, v in sorted(sh.items())},
                    "shadow_wan_saving": {p: (None if not v[1] else 1 - v[4] / v[1]) for p, v in sorted(sh.items())}}

        windows = [point(t, b["obs"], b["shadow"]) for t, b in sorted(buckets.items())]
        for w in windows:
            w["shadow_mean_age_s"] = {p: _eff(*v) for p, v in sorted(age_sums.get(w["time"], {}).items())}
        overall = point(start.isoformat(), overall_obs, overall_sh)
        age_tot: dict[str, list[int]] = {}
        for per in age_sums.values():
            for p, (a, n) in per.items():
                acc = age_tot.setdefault(p, [0, 0])
                acc[0] += a
                acc[1] += n
        overall["shadow_mean_age_s"] = {p: _eff(*v) for p, v in sorted(age_tot.items())}
        answer = {"cache_group": cache_group, "size_bytes": size_b, "step": step, "source": source,
                  "overall": overall, "windows": windows, "note": note}
        if len(windows) > stream.STREAM_WINDOWS:  # sent in pieces, never whole in memory (api/stream.py)
            return stream.answer(answer, "windows", orjson.OPT_SERIALIZE_NUMPY, gz=False)
        return P.json_response(answer)

    return answers.get(request, compute)
