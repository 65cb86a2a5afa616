"""POST /v1/whatif: replay the stored accesses of a range through any policies and sizes."""

from __future__ import annotations

import datetime as dt

from fastapi import APIRouter

from api import params as P
from api.deps import LimitsDep, StoreDep, require
from api.errors import ApiError
from api.models import ERRORS, WhatIfAnswer, WhatIfRequest, WhatIfResults
from cachescope.admission import AdmissionConfig
from cachescope.replay import WhatIf
from cachescope.units import utc

router = APIRouter(tags=["whatif"])


def to_whatif(body: WhatIfRequest) -> WhatIf:
    start, end = utc(body.from_), utc(body.to)
    for name, t in (("from", start), ("to", end)):
        if not P.EARLIEST <= t <= P.LATEST:
            raise ApiError(422, name, f"{name} {t.isoformat()} is outside 1970…2106", "body")
    if end <= start:
        raise ApiError(422, "to", "`to` must be after `from`", "body")
    warmup = body.warmup or dt.timedelta(0)
    if warmup < dt.timedelta(0) or warmup > dt.timedelta(days=366):
        raise ApiError(422, "warmup", "warmup must be a duration from 0 to 366 days (ISO-8601, e.g. P1D)", "body")
    if start - warmup < P.EARLIEST:
        raise ApiError(422, "warmup", "the warm-up starts before 1970", "body")
    step_s = P.step_seconds(body.step, start, end) if body.step else 0
    groups = body.cache_group if isinstance(body.cache_group, list) else ([body.cache_group] if body.cache_group else [])
    return WhatIf(
        policies=body.policies(), sizes=body.sizes(), start=start, end=end, cache_groups=groups,
        sites=[body.site] if body.site else [], warmup=warmup,
        partitions=1 if body.partitions == "server" else body.partitions,
        partition_by="server" if body.partitions == "server" else "auto",
        sample_rate=body.sample_rate, step_s=step_s, params=body.params,
        admission=body.admission or AdmissionConfig(),
    )


@router.post("/whatif", response_model=WhatIfAnswer | WhatIfResults, responses=ERRORS,
             dependencies=[require("whatif")])
def whatif(body: WhatIfRequest, store: StoreDep, limits: LimitsDep):
    """Replays the stored accesses of [from, to) (after an optional warm-up whose accesses fill the
    cache uncounted) through each (policy, size) in one pass of the engine's bank; by tier,
    by cache group when several are merged, against one shared cache when `partitions` > 1 (one cache
    per server, or by file hash: `routing` says which),
    and with SHARDS' error bound when sampled. The single form answers flat; lists answer
    `{"results": [...]}`."""
    req = to_whatif(body)
    # an unknown site or cache group: the library's check (replay.check_names) in limits.run, a 422
    result = limits.run(store, req)
    answers = result.answers()
    for a in answers:
        a.update(accesses=result.accesses, warmup_accesses=result.warmup_accesses, seconds=round(result.seconds, 4))
    if body.single:
        return P.json_response(answers[0])
    return P.json_response({"results": answers, "accesses": result.accesses,
                            "warmup_accesses": result.warmup_accesses, "seconds": round(result.seconds, 4)})
