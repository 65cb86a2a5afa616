"""GET /healthz: 200 once the store is open and answers; 503 with the reason when the live
collector (`serve --collect`) stopped ingesting."""

from fastapi import APIRouter, Depends, HTTPException, Request

from api.deps import get_store
from api.models import ERRORS, Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: ERRORS[503]})
def healthz(request: Request, store=Depends(get_store)) -> Health:
    live = getattr(request.app.state, "live", None)
    if live is not None and live.error_reason is not None:
        raise HTTPException(503, detail=f"collect stopped ingesting: {live.error_reason}; what arrives is "
                                        "spooled, restart `cachescope serve` to decode it")
    store.query("SELECT 1")
    return Health(status="ok", backend=store.backend, database=store.database)
