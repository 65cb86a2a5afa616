"""GET /v1/alerts: the alerts table (written by the alerting component); an empty list while the
store has no such table."""

from fastapi import APIRouter, Depends, Query

from api import params as P
from api.deps import get_store, require
from api.models import ERRORS, AlertsAnswer
from cachescope import reads

router = APIRouter(tags=["alerts"])


@router.get("/alerts", response_model=AlertsAnswer, responses=ERRORS, dependencies=[require("read")])
def alerts(store=Depends(get_store), limit: int = Query(1000, ge=1, le=100_000)):
    df = reads.alerts(store, limit)
    if df is None or not len(df):
        return P.json_response({"alerts": []})
    for c in df.columns:  # datetimes as ISO-8601 text
        if str(df[c].dtype).startswith("datetime64"):
            df[c] = P.iso(df[c])
    return P.json_response({"alerts": df.to_dict("records")})
