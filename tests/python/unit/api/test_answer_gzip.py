"""The gzip of a large answer, made on all cores (api/compress.py): one gzip member any reader
takes whole, the body back byte for byte, as small as gzip.compress's."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

from api import compress
from api.compress import CHUNK, gzip_bytes


def _answer_like(n: int) -> bytes:
    """JSON-like bytes with repeats across chunk boundaries (what the 32 KiB priming is for)."""
    rng = np.random.default_rng(n)
    out = b"".join(b'{"time":"2026-01-%02dT%02d:00:00+00:00","requests":%d,"hit_efficiency":%r},'
                   % (i % 28 + 1, i % 24, int(x), x / 7) for i, x in enumerate(rng.integers(100, 10_000, n // 80 + 1)))
    return out[:n]


@pytest.mark.parametrize("size", [CHUNK + 1, 2 * CHUNK, 3 * CHUNK + 12_345, 5 * CHUNK + 1])
def test_parallel_gzip_is_one_member_of_the_whole_body(size, monkeypatch):
    monkeypatch.setattr(compress, "cores", lambda: 2)
    body = _answer_like(size)
    z = gzip_bytes(body)
    assert gzip.decompress(z) == body
    d = zlib.decompressobj(zlib.MAX_WBITS | 16)  # a client's decoder (httpx, urllib3): the first member only
    assert d.decompress(z) + d.flush() == body and d.eof and d.unused_data == b""
    assert z[:10] == gzip.compress(body, compresslevel=1, mtime=0)[:10]  # the same header
    # the pieces are primed with the 32 KiB before them: no worse than one stream by more than 0.5 %
    assert len(z) <= len(gzip.compress(body, compresslevel=1, mtime=0)) * 1.005


@pytest.mark.parametrize("size", [0, 10, CHUNK])
def test_small_bodies_and_one_core_are_gzip_compress(size, monkeypatch):
    body = _answer_like(size) if size else b""
    assert gzip_bytes(body) == gzip.compress(body, compresslevel=1, mtime=0)
    monkeypatch.setattr(compress, "cores", lambda: 1)
    big = _answer_like(3 * CHUNK)
    assert gzip_bytes(big) == gzip.compress(big, compresslevel=1, mtime=0)


def test_pieces_are_deflated_in_the_pool(monkeypatch):
    monkeypatch.setattr(compress, "cores", lambda: 2)
    seen = []
    deflate = compress._deflate
    monkeypatch.setattr(compress, "_deflate", lambda view, a, b, level: seen.append((a, b)) or deflate(view, a, b, level))
    body = _answer_like(3 * CHUNK + 7)
    assert gzip.decompress(gzip_bytes(body)) == body
    assert sorted(seen) == [(0, CHUNK), (CHUNK, 2 * CHUNK), (2 * CHUNK, 3 * CHUNK), (3 * CHUNK, 3 * CHUNK + 7)]


def _request(gz: bool, query: bytes = b"step=1h"):
    import types

    from starlette.requests import Request

    auth = types.SimpleNamespace(scopes=lambda request: {"read"})
    app = types.SimpleNamespace(state=types.SimpleNamespace(auth=auth))
    return Request({"type": "http", "method": "GET", "path": "/v1/efficiency", "query_string": query,
                    "headers": [(b"accept-encoding", b"gzip")] if gz else [], "app": app})


def test_a_large_kept_answer_to_gzip_is_not_answered_on_the_event_loop():
    from fastapi import Response

    from api.cache import AnswerCache

    cache = AnswerCache(seconds=60)
    big, small = _answer_like(2 * CHUNK), _answer_like(100_000)
    assert cache.quick(_request(True))  # nothing kept: computed where it is asked
    in_flight = []
    cache.get(_request(True), lambda: in_flight.append(cache.quick(_request(True))) or Response(big))
    assert in_flight == [False]  # an identical request meanwhile waits in a thread, not on the loop
    assert not cache.quick(_request(True))  # kept, its gzip still to make (tens of ms)
    assert cache.quick(_request(False))  # a client without gzip takes the bytes kept
    served = cache.get(_request(True), lambda: Response(b"not asked"))
    assert served.headers["content-encoding"] == "gzip" and gzip.decompress(served.body) == big
    assert cache.quick(_request(True))  # the gzip is made: shared by every later client
    cache.get(_request(True, b"step=1d"), lambda: Response(small))
    assert cache.quick(_request(True, b"step=1d"))  # a small one is gzipped in a few ms, on the loop
