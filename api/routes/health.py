"""GET /healthz: 200 once the store is open and answers (or is busy answering another query).

Outside the /v1 slots, on threads of its own: a flood of reads, or one long read holding the
embedded store, neither queues it nor takes its thread."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter, Request

from api.models import ERRORS, Health

router = APIRouter(tags=["health"])

#: threads of the health check alone (the shared pool may be full of waiting reads)
_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="healthz")


@router.get("/healthz", response_model=Health, responses={503: ERRORS[503]})
async def healthz(request: Request) -> Health:
    store, answered = await asyncio.get_running_loop().run_in_executor(_THREADS, request.app.state.stores.ping)
    return Health(status="ok", backend=store.backend, database=store.database, busy=not answered)
