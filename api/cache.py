"""A short-lived cache of read answers, single-flight: a dashboard opened by many people asks the
same questions at once, and results change only when a window closes (every minute at most).
Concurrent identical requests wait for the first one's answer instead of each querying the
store (chDB serves one query at a time)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Callable

from fastapi import Request, Response


class AnswerCache:
    def __init__(self, seconds: float, entries: int = 512):
        self.seconds, self.entries = seconds, entries
        self._lock = threading.Lock()
        self._done: OrderedDict[str, tuple[float, Response]] = OrderedDict()
        self._running: dict[str, Future] = {}

    def get(self, request: Request, compute: Callable[[], Response]) -> Response:
        if self.seconds <= 0:
            return compute()
        key = request.url.path + "?" + "&".join(sorted(f"{k}={v}" for k, v in request.query_params.multi_items()))
        now = time.monotonic()
        with self._lock:
            hit = self._done.get(key)
            if hit is not None and now - hit[0] < self.seconds:
                self._done.move_to_end(key)
                return _copy(hit[1])
            fut = self._running.get(key)
            owner = fut is None
            if owner:
                fut = self._running[key] = Future()
        if not owner:
            return _copy(fut.result())
        try:
            answer = compute()
        except BaseException as e:
            with self._lock:
                self._running.pop(key, None)
            fut.set_exception(e)
            raise
        with self._lock:
            self._running.pop(key, None)
            if answer.status_code == 200:
                self._done[key] = (time.monotonic(), answer)
                while len(self._done) > self.entries:
                    self._done.popitem(last=False)
        fut.set_result(answer)
        return answer


def _copy(r: Response) -> Response:
    return Response(r.body, status_code=r.status_code, media_type=r.media_type)
