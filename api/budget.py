"""The server's budget for one answer and for all of them at once.

* Points: a series answer holds series x time buckets points (about 100 bytes of JSON each, and
  the rows behind them in memory twice over); beyond `max_points` it is refused before the store
  is asked, with the smallest step that fits. The windows a read scans (series x windows of the
  table the step picks) are bounded alike by `max_rows_read`: a step that is not a whole number of
  hours reads the minute table.
* Slots: every /v1 request (reads and what-if alike) takes one of `concurrency` slots for as long
  as it runs, waiting up to `busy_wait_seconds` for one on the event loop (no thread held), then a
  503. /healthz, the page and /metrics are outside it: a flood of reads never takes them down.
  Memory is then bounded by slots x one answer's bound.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import orjson

from api.errors import ApiError, error_body
from cachescope import reads

#: the steps a refusal may suggest, ascending: seconds, minutes, hours, days
_LADDER = ([s for s in range(1, 60)] + [60 * m for m in range(1, 60)] + [3600 * h for h in range(1, 24)]
           + [86_400 * d for d in range(1, 367)])


def step_text(s: int) -> str:
    for unit, n in (("d", 86_400), ("h", 3600), ("m", 60)):
        if s % n == 0:
            return f"{s // n}{unit}"
    return f"{s}s"


def buckets(start: dt.datetime, end: dt.datetime, step_s: int) -> int:
    """Buckets of `step_s` (epoch-aligned, as toStartOfInterval cuts them) that windows starting in
    [start, end) can fall in."""
    a = int(start.timestamp()) // step_s
    b = (int(-(-end.timestamp() // 1)) - 1) // step_s
    return max(b - a + 1, 0)


def _windows(start: dt.datetime, end: dt.datetime, step_s: int, minute_window_s: int) -> int:
    table = reads.table_for_step(step_s)
    length = {reads.tables.EFFICIENCY_DAILY: reads.DAY, reads.tables.EFFICIENCY_HOURLY: reads.HOUR}.get(
        table, minute_window_s or 60)
    return buckets(start, end, length)


def check_points(settings, start: dt.datetime, end: dt.datetime, step_s: int, *, series: int,
                 tier_series: int = 0, minute_window_s: int = 0, extra_series: int = 0,
                 step: str = "") -> None:
    """422 naming `step` when `series` (+ `extra_series`, e.g. the real cache beside its shadows)
    x buckets passes max_points, or `tier_series` x the windows read passes max_rows_read (0:
    not read from the store)."""
    if series <= 0:
        return
    n = series + extra_series
    max_points, max_rows = settings.max_points, settings.max_rows_read

    def fits(s: int) -> bool:
        return n * buckets(start, end, s) <= max_points and \
            (tier_series <= 0 or tier_series * _windows(start, end, s, minute_window_s) <= max_rows)

    if fits(step_s):
        return
    points = n * buckets(start, end, step_s)
    asked = step or step_text(step_s)
    if points > max_points:
        why = (f"{n:,} series x {buckets(start, end, step_s):,} buckets of {asked} = {points:,} points; an answer "
               f"holds at most {max_points:,} (the server's max_points, CACHESCOPE_API__MAX_POINTS)")
    else:
        why = (f"step {asked} reads {tier_series * _windows(start, end, step_s, minute_window_s):,} stored windows "
               f"(the {reads.table_for_step(step_s)} table); a read scans at most {max_rows:,} (the server's "
               "max_rows_read, CACHESCOPE_API__MAX_ROWS_READ)")
    fitting = next((s for s in _LADDER if fits(s)), None)
    if fitting is None:
        raise ApiError(422, "step", f"{why}: no step fits this range; shorten the range or narrow the filters "
                                    "(cache_group, policy, size, tier)")
    raise ApiError(422, "step", f"{why}: the smallest step that fits is {step_text(fitting)} "
                                "(or shorten the range, or narrow the filters)")


class Slots:
    """`limit` /v1 requests at once; the next waits up to `wait_s` seconds for a slot."""

    def __init__(self, limit: int, wait_s: float, refused=None):
        self.limit, self.wait_s, self.refused = limit, wait_s, refused
        self.busy = 0  #: slots taken now
        self._sem: asyncio.Semaphore | None = None

    async def acquire(self) -> bool:
        if self._sem is None:  # made on the serving loop
            self._sem = asyncio.Semaphore(self.limit)
        if self._sem.locked() and self.wait_s <= 0:
            return False
        try:
            await asyncio.wait_for(self._sem.acquire(), timeout=self.wait_s or None)
        except asyncio.TimeoutError:
            return False
        self.busy += 1
        return True

    def release(self) -> None:
        self.busy -= 1
        self._sem.release()


class BusyGate:
    """Pure ASGI: every /v1 request inside one of the slots, or a 503 with Retry-After."""

    def __init__(self, app, slots: Slots):
        self.app, self.slots = app, slots

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            return await self.app(scope, receive, send)
        if not await self.slots.acquire():
            if self.slots.refused is not None:
                self.slots.refused.inc()
            body = orjson.dumps(error_body("", f"the server is busy ({self.slots.limit} requests at once): retry in "
                                                "a few seconds", "server"))
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"2"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.slots.release()
