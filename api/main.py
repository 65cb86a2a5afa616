"""The REST API over the store: create_app(settings) → FastAPI app (what `cachescope serve` runs)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.core.config import Settings
from api.budget import BusyGate, Slots
from api.cache import AnswerCache
from api.deps import Auth, StorePool, require
from api.errors import ApiError, api_error, error_body, unexpected, validation_error
from api.limits import Limits
from api.metrics import BodyLimitMiddleware, LatencyMiddleware, Metrics
from api.security import SecurityHeadersMiddleware
from api.series_index import SeriesIndex
from api.routes import alerts, compare, configs, efficiency, health, mrc, recommend, whatif

STATIC = Path(__file__).parent / "static"

DESCRIPTION = """Shadow-cache results of cachescope: efficiencies by tier, miss-ratio curves, the real
cache beside its shadows, what-if replays of the stored accesses and size recommendations.

Sizes accept `10TB`, `10TiB` or bytes; times are ISO-8601 (UTC when no offset is given); every
error is JSON naming the bad field. Send `Authorization: Bearer TOKEN` when the server has tokens
(scopes `read` and `whatif`; `metrics` for GET /metrics alone)."""


def create_app(settings: Settings | None = None, stores: StorePool | None = None) -> FastAPI:
    """The app over `stores` (opened by the caller, e.g. `serve` before it listens) or, when None,
    a store pool opened at start-up from `settings`."""
    settings = settings or Settings()
    settings.check()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # a second start-up of the same app (a test client inside another) shares the open store
        owner = getattr(app.state, "stores", None) is None
        if owner:
            app.state.stores = stores if stores is not None else StorePool(settings)
        # `serve`: the efficiency copies loaded at start and kept fresh while asked for
        refresher = app.state.series.keep_fresh(app.state.stores) if app.state.keep_series_fresh else None
        try:
            yield
        finally:
            if refresher is not None:
                refresher.set()
            if owner:
                app.state.stores.close()
                app.state.stores = None

    app = FastAPI(title="cachescope", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.auth = Auth(settings.token_scopes())
    app.state.metrics = metrics
    app.state.limits = Limits(settings, metrics)
    app.state.slots = Slots(settings.concurrency, settings.busy_wait_seconds, refused=metrics.busy_refused)
    app.state.answers = AnswerCache(settings.answer_cache_seconds, counter=metrics.answers,
                                    max_bytes=settings.answer_cache_max_bytes)
    app.state.series = SeriesIndex(max_rows=settings.series_copy_max_rows,
                                   check_seconds=settings.series_copy_check_seconds)
    app.state.keep_series_fresh = False  # serve sets it: tests count the copies' loads

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, unexpected)

    async def http_error(request, exc: StarletteHTTPException):
        return Response(__import__("orjson").dumps(error_body("", str(exc.detail), "path")),
                        status_code=exc.status_code, media_type="application/json", headers=getattr(exc, "headers", None))

    app.add_exception_handler(StarletteHTTPException, http_error)

    app.include_router(health.router)
    for r in (efficiency, mrc, compare, whatif, recommend, configs, alerts):
        app.include_router(r.router, prefix="/v1")

    # with tokens configured the metrics need one too: they show the traffic and what-if load
    @app.get("/metrics", include_in_schema=False, dependencies=[require("metrics", "read")])
    def prometheus() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(BusyGate, slots=app.state.slots)  # inside the others: a refusal is timed and has its headers
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(LatencyMiddleware, metrics=metrics)
    app.add_middleware(SecurityHeadersMiddleware)  # outermost: every answer, refusals included
    if STATIC.is_dir():  # the built-in page, when its files are there
        from fastapi.responses import FileResponse
        from fastapi.staticfiles import StaticFiles

        @app.get("/favicon.ico", include_in_schema=False)
        def favicon() -> FileResponse:  # asked by browsers and tools that ignore the page's <link rel=icon>
            return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

        app.mount("/", StaticFiles(directory=STATIC, html=True), name="static")
    return app
