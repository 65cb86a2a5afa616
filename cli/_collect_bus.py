"""`cachescope collect --from amqp://…|stomp://…`: the shoveler's messages from a bus, spooled and
acked by ingest/xrootd_monitoring/bus.py; from the spool on, the same decoder, loop and checkpoints
as `--listen` (cli/collect.py)."""

from __future__ import annotations

from pathlib import Path

from cachescope.errors import UsageError


def open_bus(url: str, spool: Path, *, exchange: str | None, queue: str | None, routing_key: str | None,
             on_malformed):
    """The bus source for `--from URL`, connected and subscribed, and the collector id it defaults to."""
    from ingest.xrootd_monitoring.bus import AmqpSource, StompSource, parse_from, parse_stomp

    if url.startswith("stomp://"):
        if (exchange, queue, routing_key) != (None, None, None):
            raise UsageError("--exchange, --queue and --routing-key are AMQP's: with stomp:// the destination is "
                             "the URL's path (stomp://USER:PASS@HOST:PORT/topic/NAME)")
        settings = parse_stomp(url)
        return StompSource(settings, spool, on_malformed=on_malformed), settings.ident
    settings = parse_from(url, exchange=exchange, queue=queue, routing_key=routing_key)
    return (AmqpSource(settings, spool, on_malformed=on_malformed),
            f"amqp:{settings.host}:{settings.port}/{settings.queue}")
