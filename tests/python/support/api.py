"""The API in process over a store (FastAPI's TestClient; the app's lifespan runs, as in serve)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def api_client(**settings) -> Iterator:
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app

    with TestClient(create_app(Settings(**settings))) as c:
        yield c
