"""Prometheus metrics of the API (its own registry): request latency by route, what-if durations
and rows scanned; GET /metrics serves them."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram("cachescope_api_request_seconds", "API request latency by route",
                                 ["method", "route", "status"], registry=self.registry,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.whatif_seconds = Histogram("cachescope_whatif_seconds", "what-if replay duration (read + engine)",
                                        registry=self.registry, buckets=(.1, .25, .5, 1, 2, 3, 5, 10, 20, 60, 120, 300))
        self.whatif_rows = Counter("cachescope_whatif_rows_scanned", "stored accesses read by what-if replays",
                                   registry=self.registry)
        self.answers = Counter("cachescope_api_answers", "read answers: computed, joined (shared with an identical "
                               "request in flight) or cached", ["outcome"], registry=self.registry)
        self.busy_refused = Counter("cachescope_api_busy_refused", "/v1 requests refused with a 503: every slot "
                                    "taken for the whole wait", registry=self.registry)
        self.whatif_refused = Counter("cachescope_whatif_refused", "what-if replays refused (too many at once)",
                                      registry=self.registry)


class _HttpMiddleware:
    """Pure ASGI middleware of HTTP requests (`http`); other scopes (lifespan) pass straight through."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        return await self.http(scope, receive, send)


class LatencyMiddleware(_HttpMiddleware):
    """Times every HTTP request, labelled by the route's path template."""

    def __init__(self, app, metrics: Metrics):
        super().__init__(app)
        self.metrics = metrics

    async def http(self, scope, receive, send):
        t0 = time.perf_counter()
        status = {"code": 500}

        async def send_status(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.latency.labels(method_label(scope.get("method", "")), route_label(scope),
                                        str(status["code"])).observe(time.perf_counter() - t0)


#: every label value comes from a fixed set: a client must not grow the registry (any method
#: string or path would otherwise become a label value of its own)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str) -> str:
    return method if method in METHODS else "other"


def route_label(scope) -> str:
    """The matched API route's path template (FastAPI sets `route`); the page's files and
    anything unknown share one label."""
    route = scope.get("route")
    if route is None:
        return "unmatched"
    if getattr(route, "param_convertors", None):  # a template (without the router's prefix)
        return getattr(route, "path_format", "unmatched")
    return scope.get("path", "")  # a route without parameters matches one path: its own template


class BodyLimitMiddleware(_HttpMiddleware):
    """Refuses request bodies above `limit` bytes with a JSON 413 (declared or streamed)."""

    def __init__(self, app, limit: int):
        super().__init__(app)
        self.limit = limit

    async def http(self, scope, receive, send):
        from api.errors import error_body
        from fastapi.responses import JSONResponse

        too_big = JSONResponse(error_body("body", f"request body above {self.limit} bytes", "body"), status_code=413)
        for k, v in scope.get("headers", []):
            if k == b"content-length":
                try:
                    if int(v) > self.limit:
                        return await too_big(scope, receive, send)
                except ValueError:
                    pass
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooBig()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooBig:
            await too_big(scope, receive, send)


class _TooBig(Exception):
    pass


class CollectMetrics:
    """`serve --collect`: the collector's counts as Prometheus metrics (read when scraped; the
    collector's thread keeps counting meanwhile, so a scrape that races it is retried)."""

    def __init__(self, assembler, receiver=None, live=None):
        self.assembler = assembler
        self.receiver = receiver  # the socket: datagrams the kernel dropped (its buffer full)
        self.live = live  # LiveCollector: whether ingestion stopped

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        for _ in range(5):
            try:
                stats = self.assembler.stats
                streams = list(self.assembler.streams.values())
                lost = [(s.name, s.origin, kind, n) for s in streams for kind, n in list(s.lost.items())]
                # streams closed since (idle, the stream cap) keep their count, summed by server
                lost += [(server, "(closed streams)", kind, n) for (server, kind), n in list(stats.closed_lost.items())]
                dropped = list(stats.dropped.items())
                closed = list(stats.streams_closed.items())
                break
            except RuntimeError:  # a dict changed size while being read
                continue
        else:
            return
        simple = (("datagrams", "datagrams received", stats.datagrams),
                  ("events", "access events decoded", stats.events),
                  ("duplicate_datagrams", "datagrams received twice (dropped)", stats.duplicates),
                  ("reordered_datagrams", "datagrams that came after a later one of their stream and were put "
                   "back in order", stats.reordered),
                  ("late_datagrams", "datagrams that came after the reorder window passed their place (dropped; "
                   "their gap counts as lost)", stats.late),
                  ("reused_sequence_datagrams", "datagrams whose packet number was waiting with other bytes "
                   "(dropped)", stats.reused),
                  ("conflict_datagrams", "datagrams naming a server id and start time another sender owns "
                   "(dropped)", stats.conflicts),
                  ("refused_datagrams", "datagrams from senders not allowed (dropped)", stats.refused),
                  ("rejected", "records rejected", stats.rejected))
        for name, doc, value in simple:
            m = CounterMetricFamily(f"cachescope_collect_{name}", doc)
            m.add_metric([], value)
            yield m
        m = CounterMetricFamily("cachescope_collect_lost_datagrams", "datagrams missing from a server's packet "
                                "sequence, by server, stream origin and stream kind", labels=["server", "origin", "stream"])
        for server, origin, kind, n in lost:
            m.add_metric([server, origin, kind], n)
        yield m
        m = CounterMetricFamily("cachescope_collect_dropped_datagrams", "undecodable datagrams, by kind",
                                labels=["kind"])
        for kind, n in dropped:
            m.add_metric([kind], n)
        yield m
        if self.receiver is not None:
            from prometheus_client.core import GaugeMetricFamily

            m = CounterMetricFamily("cachescope_collect_kernel_drops", "datagrams the kernel dropped for the "
                                    "collector's socket (its receive buffer full)")
            m.add_metric([], self.receiver.kernel_drops())
            yield m
            m = CounterMetricFamily("cachescope_collect_spool_skipped_bytes", "spooled bytes removed by the "
                                    "spool's bounds before they were decoded")
            m.add_metric([], self.receiver.skipped_bytes())
            yield m
            if self.live is not None:
                m = GaugeMetricFamily("cachescope_collect_ingestion_stopped", "1 when an error stopped decoding "
                                      "(GET /healthz says why)")
                m.add_metric([], 1 if self.live.error_reason is not None else 0)
                yield m
        m = CounterMetricFamily("cachescope_collect_streams_closed", "server streams closed (their held accesses "
                                "written), by why: idle, cap (collect.max_streams), budget (collect.max_held_records)",
                                labels=["why"])
        for why, n in closed:
            m.add_metric([why], n)
        yield m
