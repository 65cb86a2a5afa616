"""Large answers written in pieces: the JSON of an answer holding a long list (series, windows)
is sent as it is written, the list item by item wherever it is among the keys, a piece of about
PIECE bytes at a time, gzipped as it goes when the client accepts it. The bytes are those of
orjson.dumps of the whole answer (tests compare them); the server holds the answer's arrays and
one piece, never the whole body (14.5 MB for 138,240 points, plus its gzip, per request and per
kept answer before).

Such an answer is not kept by the answer cache (its bytes never exist whole); requests in flight
for the same one still share its computation (the arrays) and each writes its own bytes."""

from __future__ import annotations

import zlib
from typing import Callable, Iterable, Iterator

import orjson
from starlette.responses import StreamingResponse

#: bytes per piece sent
PIECE = 256 * 1024
#: an answer of more points than this is streamed (about 100 bytes of JSON a point: 2 MB)
STREAM_POINTS = 20_000
#: a /v1/compare answer of more windows than this is streamed (about 1 kB of JSON a window)
STREAM_WINDOWS = 2_000


def pieces(answer: dict, key: str, option: int) -> Iterator[bytes]:
    """orjson.dumps(answer, option=option) in pieces, the list answer[key] written item by item."""
    names = list(answer)
    at = names.index(key)
    before = orjson.dumps({k: answer[k] for k in names[:at]}, option=option)[:-1]  # without its "}"
    after = orjson.dumps({k: answer[k] for k in names[at + 1:]}, option=option)[1:]  # without its "{"
    buf = bytearray(before + (b"," if at else b"") + orjson.dumps(key) + b":[")
    for i, item in enumerate(answer[key]):
        if i:
            buf += b","
        buf += orjson.dumps(item, option=option)
        if len(buf) >= PIECE:
            yield bytes(buf)
            buf.clear()
    buf += b"]" + (b"," if len(after) > 1 else b"") + after
    yield bytes(buf)


def gzipped(chunks: Iterable[bytes], level: int = 1) -> Iterator[bytes]:
    """One gzip member of the chunks, written as they come (mtime 0, as gzip.compress(mtime=0))."""
    c = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for chunk in chunks:
        out = c.compress(chunk)
        if out:
            yield out
    yield c.flush()


class Streamed(StreamingResponse):
    """A JSON answer made by `make()` (a fresh iterator of its pieces each call), gzipped as it goes
    when `gz`; `again(gz)` is the same answer for another request."""

    def __init__(self, make: Callable[[], Iterator[bytes]], gz: bool, status_code: int = 200):
        self.make = make
        headers = {"Vary": "Accept-Encoding", **({"Content-Encoding": "gzip"} if gz else {})}
        super().__init__(gzipped(make()) if gz else make(), status_code=status_code,
                         media_type="application/json", headers=headers)

    def again(self, gz: bool) -> "Streamed":
        return Streamed(self.make, gz, self.status_code)


def answer(payload: dict, key: str, option: int, gz: bool) -> Streamed:
    return Streamed(lambda: pieces(payload, key, option), gz)
