"""A short-lived cache of read answers, single-flight: a dashboard opened by many people asks the
same questions at once, and results change only when a window closes (every minute at most).
Concurrent identical requests wait for the first one's answer instead of each querying the
store (chDB serves one query at a time) — with the cache off too (`seconds` 0 keeps no finished
answer, but identical requests in flight still share one computation)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Callable

from fastapi import Request, Response

from api.compress import gzip_bytes
from api.stream import Streamed


class AnswerCache:
    def __init__(self, seconds: float, entries: int = 512, counter=None, max_bytes: int = 128 << 20):
        self.seconds, self.entries, self.max_bytes = seconds, entries, max_bytes
        #: answers computed, answers shared with a request in flight, answers from the cache
        self.computed = self.joined = self.cached = 0
        self._counter = counter  # a prometheus Counter labelled by outcome, or None
        self._lock = threading.Lock()
        self._done: OrderedDict[str, tuple[float, Response]] = OrderedDict()
        self._running: dict[str, Future] = {}

    @staticmethod
    def _key(request: Request) -> str:
        # the scopes are part of the key: an answer may depend on them (compare replays only for whatif)
        scopes = "+".join(sorted(request.app.state.auth.scopes(request)))
        return scopes + " " + request.url.path + "?" + "&".join(sorted(f"{k}={v}" for k, v in request.query_params.multi_items()))

    def quick(self, request: Request) -> bool:
        """False when answering `request` may have to gzip a large kept answer first (tens of ms:
        not on the event loop), or to wait for one computed in a thread."""
        key = self._key(request)
        with self._lock:
            if key in self._running:
                return False
            hit = self._done.get(key)
        e = hit[1] if hit is not None else None
        return e is None or e.gz_ready() or not _wants_gzip(request, e) or len(e.body) < _LOOP_GZIP_MAX

    def get(self, request: Request, compute: Callable[[], Response]) -> Response:
        key = self._key(request)
        now = time.monotonic()
        gz = "gzip" in request.headers.get("accept-encoding", "")
        with self._lock:
            hit = self._done.get(key)
            if hit is not None and now - hit[0] < self.seconds:
                self._done.move_to_end(key)
            else:
                hit = None
            fut = None if hit is not None else self._running.get(key)
            owner = hit is None and fut is None
            if owner:
                fut = self._running[key] = Future()
            outcome = "computed" if owner else "joined" if hit is None else "cached"
            setattr(self, outcome, getattr(self, outcome) + 1)
        if self._counter is not None:
            self._counter.labels(outcome).inc()
        if hit is not None:  # compressed outside the lock: the other requests need not wait for it
            return _copy(hit[1], gz)
        if not owner:
            got = fut.result()
            return got.again(gz) if isinstance(got, Streamed) else _copy(got, gz)
        try:
            answer = compute()
        except BaseException as e:
            with self._lock:
                self._running.pop(key, None)
            fut.set_exception(e)
            raise
        if isinstance(answer, Streamed):  # written in pieces for each request, never kept whole
            with self._lock:
                self._running.pop(key, None)
            fut.set_result(answer)
            return answer
        entry = _Entry(answer)
        with self._lock:
            self._running.pop(key, None)
            if answer.status_code == 200 and self.seconds > 0 and entry.size() <= self.max_bytes // 2:
                self._done[key] = (time.monotonic(), entry)
                self._trim()
        fut.set_result(entry)
        # the first answer goes out as computed: compressing it costs more CPU than sending it on
        # a fast link, and most answers of a busy dashboard are asked once (varied ranges); the
        # gzip is made once an answer is served again, then shared by every later client
        answer.headers["Vary"] = "Accept-Encoding"
        return answer

    def _trim(self) -> None:
        """Under the lock: the oldest kept answers dropped while over `entries` or `max_bytes`
        (each counted with room for its gzip)."""
        total = sum(e.size() for _, e in self._done.values())
        while self._done and (len(self._done) > self.entries or total > self.max_bytes):
            total -= self._done.popitem(last=False)[1][1].size()


class _Entry:
    """An answer's bytes, and their gzip (made once, when the answer is served a second time, for
    every client that accepts it: a large series answer shrinks about 5×)."""

    def __init__(self, r: Response):
        self.body, self.status, self.media_type = r.body, r.status_code, r.media_type
        self._gz: bytes | None = None
        self._lock = threading.Lock()

    def size(self) -> int:
        return len(self.body) + 2 * len(self.body) // 5  # with room for its gzip (about 1/5) made later

    def gz_ready(self) -> bool:
        return self._gz is not None

    def gz(self) -> bytes:
        with self._lock:
            if self._gz is None:
                self._gz = gzip_bytes(self.body, level=1)  # 3x faster than 5, ~20% larger; on all cores
            return self._gz


#: below this, compression costs more than it saves
_GZIP_MIN = 4096
#: a kept answer this large is gzipped in a thread, not on the event loop (256 KiB: about 2 ms)
_LOOP_GZIP_MAX = 256 * 1024


def _wants_gzip(request: Request, e: _Entry) -> bool:
    return "gzip" in request.headers.get("accept-encoding", "") and len(e.body) >= _GZIP_MIN


def _copy(e: _Entry, gz: bool) -> Response:
    if gz and len(e.body) >= _GZIP_MIN:
        return Response(e.gz(), status_code=e.status, media_type=e.media_type,
                        headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    return Response(e.body, status_code=e.status, media_type=e.media_type, headers={"Vary": "Accept-Encoding"})
