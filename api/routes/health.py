"""GET /healthz: 200 once the store is open and answers (or is busy answering another query); 503
with the reason when the live collector (`serve --collect`) stopped ingesting.

Outside the /v1 slots, on threads of its own: a flood of reads, or one long read holding the
embedded store, neither queues it nor takes its thread."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter, HTTPException

from api.deps import LiveDep, StoresDep

from api.models import ERRORS, Health

router = APIRouter(tags=["health"])

#: threads of the health check alone (the shared pool may be full of waiting reads)
_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="healthz")


@router.get("/healthz", response_model=Health, responses={503: ERRORS[503]})
async def healthz(stores: StoresDep, live: LiveDep) -> Health:
    if live is not None and live.error_reason is not None:
        raise HTTPException(503, detail=f"collect stopped ingesting: {live.error_reason}; what arrives is "
                                        "spooled, restart `cachescope serve` to decode it")
    store, answered = await asyncio.get_running_loop().run_in_executor(_THREADS, stores.ping)
    return Health(status="ok", backend=store.backend, database=store.database, busy=not answered)
