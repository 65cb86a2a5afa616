"""GET /v1/alerts: alert transitions (firing, resolved) the pipeline wrote as windows closed, with
the numbers that caused them; an empty list while the store has no alerts table."""

import datetime as dt
from typing import Literal, Optional

from fastapi import APIRouter, Query

from api import params as P
from api.deps import StoreDep, require
from api.models import ERRORS, AlertsAnswer
from cachescope import reads
from cachescope.store import tables

router = APIRouter(tags=["alerts"])


@router.get("/alerts", response_model=AlertsAnswer, responses=ERRORS, dependencies=[require("read")])
def alerts(
    store: StoreDep,
    from_: Optional[dt.datetime] = Query(None, alias="from", description="ISO-8601; default: start of the results"),
    to: Optional[dt.datetime] = Query(None, description="ISO-8601; default: end of the results"),
    state: Optional[Literal["firing", "resolved"]] = Query(None, description="only this state; both by default"),
    cache_group: list[str] = Query([], description="cache groups (repeat or comma-separate); all by default"),
    limit: int = Query(1000, ge=1, le=100_000),
):
    """Transitions with their time (the end of the window that decided), rule, cache group, state,
    severity, value, threshold, reference, when the condition started, and a summary."""
    P.check_names(store, "cache_group", P.split(cache_group))
    if tables.ALERTS not in store.tables():
        return P.json_response({"alerts": []})
    start, end = P.time_range(store, from_, to)
    # the last transitions are decided by the last window: its end is inside the default range
    df = reads.alerts(store, start, end + dt.timedelta(microseconds=1), state,
                      cache_groups=P.split(cache_group)).head(limit)
    for c in df.columns:  # datetimes as ISO-8601 text
        if str(df[c].dtype).startswith("datetime64"):
            df[c] = P.iso(df[c])
    return P.json_response({"alerts": df.to_dict("records")})
