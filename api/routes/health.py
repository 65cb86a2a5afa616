"""GET /healthz: 200 once the store is open and answers."""

from fastapi import APIRouter, Depends, Request

from api.deps import get_store
from api.models import ERRORS, Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: ERRORS[503]})
def healthz(request: Request, store=Depends(get_store)) -> Health:
    store.query("SELECT 1")
    return Health(status="ok", backend=store.backend, database=store.database)
