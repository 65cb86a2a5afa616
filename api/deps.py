"""Dependencies: the store (one chDB session, or a pool of server connections) and auth scopes."""

from __future__ import annotations

import hashlib
import hmac
import queue
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Iterator

from fastapi import Depends, Request

from api.core.config import Settings
from api.errors import ApiError
from cachescope.store import Store, open_store

if TYPE_CHECKING:
    from api.cache import AnswerCache
    from api.limits import Limits
    from api.series_index import SeriesIndex


class StorePool:
    """chDB: one session (it serialises queries itself). Server: up to N connections, each used
    by one request at a time (a driver client is not thread-safe)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.backend = "embedded" if settings.store_dir is not None else "server"
        self._free: queue.LifoQueue[Store] = queue.LifoQueue()
        self._all: list[Store] = []
        self._lock = threading.Lock()
        self._free.put(self._open())  # opening fails here, at start-up, if the store is unusable

    def _open(self) -> Store:
        s = self.settings
        store = open_store(store_dir=s.store_dir, database=s.database) if s.store_dir is not None else \
            open_store(clickhouse_url=s.clickhouse_url, database=s.database)
        self._all.append(store)
        return store

    @contextmanager
    def get(self) -> Iterator[Store]:
        if self.backend == "embedded":
            yield self._all[0]
            return
        try:
            store = self._free.get_nowait()
        except queue.Empty:
            with self._lock:
                grow = len(self._all) < self.settings.store_connections
                store = self._open() if grow else None
            if store is None:
                store = self._free.get()
        try:
            yield store
        finally:
            self._free.put(store)

    def ping(self) -> tuple[Store, bool]:
        """(a store, whether it answered SELECT 1): not when every connection is serving a query,
        which is not waited for (busy is alive)."""
        if self.backend == "embedded":
            return self._all[0], self._all[0].ping()
        try:
            store = self._free.get_nowait()
        except queue.Empty:
            return self._all[0], False
        try:
            return store, store.ping()
        finally:
            self._free.put(store)

    def close(self) -> None:
        for s in self._all:
            s.close()
        self._all.clear()


def get_store(request: Request) -> Iterator[Store]:
    with request.app.state.stores.get() as store:
        yield store


async def get_stores(request: Request) -> StorePool:
    return request.app.state.stores


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_limits(request: Request) -> "Limits":
    return request.app.state.limits


async def get_answers(request: Request) -> "AnswerCache":
    return request.app.state.answers


async def get_series(request: Request) -> "SeriesIndex":
    return request.app.state.series


async def get_scopes(request: Request) -> frozenset[str]:
    return request.app.state.auth.scopes(request)


async def get_live(request: Request):
    return getattr(request.app.state, "live", None)  # the collector of `serve --collect`, else None


# What a route takes, by type (FastAPI's Annotated dependencies): create_app puts each on app.state
# once; a route never reaches into app.state itself. The getters are async: no thread hop (a sync
# dependency runs in the shared pool, which /healthz must not wait for).
StoreDep = Annotated[Store, Depends(get_store)]  # one store for the request (a pooled connection)
StoresDep = Annotated[StorePool, Depends(get_stores)]  # for routes that may answer without a store
SettingsDep = Annotated[Settings, Depends(get_settings)]
LimitsDep = Annotated["Limits", Depends(get_limits)]
AnswersDep = Annotated["AnswerCache", Depends(get_answers)]
SeriesDep = Annotated["SeriesIndex", Depends(get_series)]
ScopesDep = Annotated[frozenset[str], Depends(get_scopes)]
LiveDep = Annotated[object, Depends(get_live)]


class Auth:
    """Bearer tokens compared by their sha256 in constant time; open when none is configured
    (only allowed on loopback: Settings.check)."""

    def __init__(self, tokens: dict[bytes, frozenset[str]]):
        self.tokens = tokens

    def scopes(self, request: Request) -> frozenset[str]:
        if not self.tokens:
            return frozenset({"read", "whatif"})
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "authorization", "send `Authorization: Bearer TOKEN`", "header",
                           headers={"WWW-Authenticate": "Bearer"})
        digest = hashlib.sha256(token.strip().encode()).digest()
        found: frozenset[str] | None = None
        for known, scopes in self.tokens.items():  # every entry compared: no early exit on a match
            if hmac.compare_digest(known, digest):
                found = scopes
        if found is None:
            raise ApiError(401, "authorization", "unknown token", "header", headers={"WWW-Authenticate": "Bearer"})
        return found


def require(scope: str, *alternatives: str):
    """A dependency: the token has `scope` (or one of `alternatives`)."""
    accepted = {scope, *alternatives}

    # async: a hash and a comparison, no I/O; a sync dependency would cost a thread hop per request
    async def check(scopes: ScopesDep) -> None:
        if not accepted & scopes:
            raise ApiError(403, "authorization", f"this token lacks the {' or '.join(map(repr, sorted(accepted)))} "
                                                 "scope", "header")
    return Depends(check)
