"""Every error is JSON naming the bad field: FastAPI's own shape (`detail: [{loc, msg, type}]`)
plus `field`, for validation errors, refusals (413, 429), auth (401, 403) and store failures."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


class ApiError(Exception):
    def __init__(self, status: int, field: str, message: str, where: str = "query", headers: dict | None = None):
        super().__init__(message)
        self.status, self.field, self.message, self.where, self.headers = status, field, message, where, headers


def error_body(field: str, message: str, where: str, kind: str = "value_error") -> dict:
    loc = [where, field] if field else [where]
    return {"detail": [{"loc": loc, "msg": message, "type": kind}], "field": field}


async def api_error(request: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.field, exc.message, exc.where), status_code=exc.status, headers=exc.headers)


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    detail = []
    for e in exc.errors():
        d = {"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        detail.append(d)
    loc = detail[0]["loc"] if detail else []
    field = ".".join(x for x in loc[1:]) if len(loc) > 1 else (loc[0] if loc else "")
    return JSONResponse({"detail": detail, "field": field}, status_code=422)


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    # a store that went away, a query the engine refused: the store is at fault, not the caller
    from cachescope.store import StoreError

    if isinstance(exc, StoreError):
        return JSONResponse(error_body("", f"the store failed: {str(exc).splitlines()[0][:300]}", "store"),
                            status_code=503)
    return JSONResponse(error_body("", f"internal error: {type(exc).__name__}", "server"), status_code=500)
