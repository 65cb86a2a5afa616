"""`cachescope collect --from amqp://…|stomp://…`: the shoveler's messages from a bus, spooled and
acked by ingest/xrootd_monitoring/bus.py; from the spool on, the same decoder, loop and checkpoints
as `--listen` (cli/collect.py)."""

from __future__ import annotations

from cachescope.errors import UsageError


def bus_settings(url: str, *, exchange: str | None, queue: str | None, routing_key: str | None):
    """`--from URL` -> (settings, the source's class, the collector id it defaults to); usage errors
    before anything connects."""
    from ingest.xrootd_monitoring.bus import AmqpSource, StompSource, parse_from, parse_stomp

    if url.startswith("stomp://"):
        if (exchange, queue, routing_key) != (None, None, None):
            raise UsageError("--exchange, --queue and --routing-key are AMQP's: with stomp:// the destination is "
                             "the URL's path (stomp://USER:PASS@HOST:PORT/topic/NAME)")
        settings = parse_stomp(url)
        return settings, StompSource, settings.ident
    settings = parse_from(url, exchange=exchange, queue=queue, routing_key=routing_key)
    return settings, AmqpSource, f"amqp:{settings.host}:{settings.port}/{settings.queue}"
