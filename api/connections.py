"""Slow and idle clients of `cachescope serve`: uvicorn's HTTP/1.1 protocol (h11) with a header
deadline, a body stall timeout and a cap on open connections.

uvicorn 0.54 times out only an idle keep-alive connection (`timeout_keep_alive`, armed after a
response): a connection that sends nothing, or half a header and then stalls, stays open for as
long as the client likes, and `limit_concurrency` answers 503 only once a whole request header has
arrived. This protocol adds what it lacks:

* header: a request's header (the first, or the next on a kept-alive connection) must be whole
  within `header_timeout_seconds` of its first byte (of the connection, for the first); bytes
  trickling in do not extend it. Past it: 408 and the connection is closed.
* body: while a request body is being read, a gap of `body_timeout_seconds` without a byte
  closes the connection (the application sees the client gone).
* connections: above `max_connections` open at once a new connection gets a 503 and is closed
  at once, before anything is read from it.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_503 = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 1\r\nconnection: close\r\n\r\n"


class GuardedH11Protocol(H11Protocol):
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1024

    _timer: asyncio.TimerHandle | None = None
    _phase: str = ""

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(_503)
            transport.close()
            return
        self._arm("header", self.header_timeout)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._cancel()
        elif self.conn.their_state is h11.SEND_BODY:
            self._arm("body", self.body_timeout)  # re-armed at every chunk: a stall, not a slow upload
        elif self.conn.their_state is h11.IDLE:
            if self._phase != "header":  # a header has begun: its deadline runs from its first byte
                self._arm("header", self.header_timeout)
        else:  # the request is whole: the answer's time is the server's, not a stalled client's
            self._cancel()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # a pipelined next request already begun (bytes buffered, header not whole): its deadline
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._arm("header", self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _arm(self, phase: str, seconds: float) -> None:
        self._cancel()
        self._phase = phase
        self._timer = self.loop.call_later(seconds, self._expired)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._phase = None, ""

    def _expired(self) -> None:
        phase = self._phase
        self._timer, self._phase = None, ""
        if self.transport.is_closing():
            return
        self.logger.info("closing a connection from %s: its request %s stalled", self.client, phase)
        if phase == "header" and self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
            self.transport.write(_408)  # nothing was answered yet: say why
        self.transport.close()


def guarded_protocol(header_timeout: float, body_timeout: float, max_connections: int) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn.Config(http=...), with these bounds."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "header_timeout": header_timeout, "body_timeout": body_timeout, "max_connections": max_connections})
