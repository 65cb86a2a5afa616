"""Large answers written in pieces: the JSON of an answer holding a long list (series, windows)
is sent as it is written, the list item by item wherever it is among the keys, a piece of about
PIECE bytes at a time, gzipped as it goes when the client accepts it. The bytes are those of
orjson.dumps of the whole answer (tests compare them); the server holds the answer's arrays and
one piece, never the whole body (14.5 MB for 138,240 points, plus its gzip, per request and per
kept answer before).

Such an answer is not kept by the answer cache (its bytes never exist whole); requests in flight
for the same one still share its computation (the arrays) and each writes its own bytes."""

from __future__ import annotations

import threading
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


class _Tape:
    """One gzip of an answer, read by every request sharing the answer: the reader that first needs
    the next piece makes it, the others wait for it (one compression, not one per client: 16
    clients gzipping the largest answer each took 2.4 s of CPU). Holds the gzip only (about a fifth
    of the JSON), while a reader still has it."""

    def __init__(self, chunks: Iterator[bytes]):
        self._it = chunks
        self._pieces: list[bytes] = []
        self._end = False
        self._error: BaseException | None = None
        self._making = False
        self._cond = threading.Condition()

    def read(self) -> Iterator[bytes]:
        i = 0
        while True:
            with self._cond:
                while i >= len(self._pieces) and not self._end and self._making:
                    self._cond.wait()
                if self._error is not None:
                    raise self._error
                if i < len(self._pieces):
                    piece = self._pieces[i]
                elif self._end:
                    return
                else:
                    piece, self._making = None, True
            if piece is None:  # this reader makes the next piece, outside the lock
                try:
                    made = next(self._it, None)
                except BaseException as e:
                    with self._cond:
                        self._error, self._making = e, False
                        self._cond.notify_all()
                    raise
                with self._cond:
                    self._making = False
                    if made is None:
                        self._end = True
                    else:
                        self._pieces.append(made)
                    self._cond.notify_all()
                continue
            i += 1
            yield piece


class _Family:
    """What the requests sharing one answer share: how to write it, and its gzip once asked."""

    def __init__(self, make: Callable[[], Iterator[bytes]]):
        self.make = make
        self._tape: _Tape | None = None
        self._lock = threading.Lock()

    def gz(self) -> Iterator[bytes]:
        with self._lock:
            if self._tape is None:
                self._tape = _Tape(gzipped(self.make()))
            return self._tape.read()


class Streamed(StreamingResponse):
    """A JSON answer made by `make()` (a fresh iterator of its pieces each call), gzipped as it goes
    when `gz` (one gzip shared by the requests of the answer); `again(gz)` is the same answer for
    another request."""

    def __init__(self, make: Callable[[], Iterator[bytes]], gz: bool, status_code: int = 200,
                 family: _Family | None = None):
        self.family = family or _Family(make)
        headers = {"Vary": "Accept-Encoding", **({"Content-Encoding": "gzip"} if gz else {})}
        super().__init__(self.family.gz() if gz else make(), status_code=status_code,
                         media_type="application/json", headers=headers)

    def again(self, gz: bool) -> "Streamed":
        return Streamed(self.family.make, gz, self.status_code, self.family)


def answer(payload: dict, key: str, option: int, gz: bool = False) -> Streamed:
    return Streamed(lambda: pieces(payload, key, option), gz)
