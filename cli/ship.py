"""`cachescope ship`: follow a log file (or consume a Kafka topic of log records, e.g. dCache's
billing topic) into Kafka, exactly once, rejects to a dead-letter topic."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cli.app import app


@app.command()
def ship(
    fmt: Annotated[str, typer.Option("--format", help="log format (see `cachescope parse --help`)")],
    source: Annotated[str, typer.Option("--from", help="log file to follow, or kafka://HOST:PORT/TOPIC to consume "
                                                       "(dCache's billing topic: --format dcache-json)")],
    to: Annotated[str, typer.Option("--to", help="kafka://HOST:PORT/TOPIC")],
    site: Annotated[str, typer.Option(help="site name")] = "",
    config: Annotated[Optional[str], typer.Option(help="site configuration YAML")] = None,
    state: Annotated[Optional[str], typer.Option(help="local mirror of the read position (JSON; files only)")] = None,
    shipper_id: Annotated[Optional[str], typer.Option(help="stable name of this shipper (default host:path "
                                                           "or host:topic)")] = None,
    group_id: Annotated[Optional[str], typer.Option(help="consumer group of a kafka:// source (default "
                                                         "cachescope-shipper.SOURCE.TOPIC)")] = None,
    dead_letter: Annotated[Optional[str], typer.Option(help="topic for rejected lines (default TOPIC.rejects)")] = None,
    origin: Annotated[Optional[str], typer.Option(help="id of the log stream (default file:HOST:PATH of --from; "
                                                  "e.g. collector:SERVER for a collector's output); files only")] = None,
    # 20,000: a commit waits ~10-60 ms on the broker, so 2,500-line transactions capped a shipper
    # near 80k lines/s; messages stay at most 2,500 events (cachescope.core.messages.MESSAGE_EVENTS)
    batch: Annotated[int, typer.Option(help="lines per Kafka transaction at most")] = 20000,
    linger: Annotated[float, typer.Option(help="seconds a partial batch may wait")] = 1.0,
    follow: Annotated[bool, typer.Option("--follow/--no-follow", help="keep following the file (tail -F) or "
                                                                       "topic; --no-follow stops at the end "
                                                                       "seen at start")] = True,
    metrics_port: Annotated[Optional[int], typer.Option(help="serve Prometheus metrics on this port")] = None,
) -> None:
    """Ship the accesses of a log file or topic to Kafka as batched AccessEvent messages keyed by cache group."""
    from cli import _checks
    from cachescope.config import load_config
    from cachescope.errors import UsageError
    from ingest.formats import FORMATS

    # everything checkable is checked before connecting
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: unknown; known: {', '.join(FORMATS)}")
    if batch < 1 or linger < 0:
        raise UsageError(f"--batch {batch} / --linger {linger:g}: need at least 1 line and 0 seconds")
    bootstrap, _ = _checks.kafka_url(to, "--to")
    if source.startswith("kafka://"):
        source_bootstrap, _ = _checks.kafka_url(source, "--from")
    else:
        _checks.input_file(source, "--from")
        _checks.plain_text_log(source, "--from")
    load_config(config)
    _checks.kafka_reachable(bootstrap, "--to")
    if source.startswith("kafka://"):
        _checks.kafka_reachable(source_bootstrap, "--from")
    if metrics_port:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr="127.0.0.1")
    if source.startswith("kafka://"):
        if state:  # the position is the consumer group's offsets
            raise typer.BadParameter("--state is for a file source", param_hint="--state")
        ship_topic(fmt, source, to, site=site, config=config, shipper_id=shipper_id, group_id=group_id,
                   dead_letter=dead_letter, batch=batch, linger=linger, follow=follow)
        return
    if group_id:
        raise typer.BadParameter("--group-id is for a kafka:// source", param_hint="--group-id")
    if origin is not None and not origin.strip():
        raise typer.BadParameter("an origin id must not be empty", param_hint="--origin")
    from ingest.shipper import Shipper

    shipper = Shipper(fmt, source, to, config=load_config(config), site=site, shipper_id=shipper_id,
                      state_file=state, dead_letter_topic=dead_letter, batch_events=batch, linger_seconds=linger,
                      origin=origin)
    try:
        pos = shipper.run(follow=follow)
    except KeyboardInterrupt:
        pos = shipper.pos
    finally:
        shipper.close()
    typer.echo(f"shipped {source} up to line {pos.line} (byte {pos.offset}), next seq {pos.seq}", err=True)


def ship_topic(fmt: str, source: str, to: str, *, site: str, config: str | None, shipper_id: str | None,
               group_id: str | None, dead_letter: str | None, batch: int, linger: float, follow: bool) -> None:
    from cachescope.config import load_config
    from ingest.kafka_source import TopicShipper

    shipper = TopicShipper(fmt, source, to, config=load_config(config), site=site, group_id=group_id,
                           shipper_id=shipper_id, dead_letter_topic=dead_letter, batch_events=batch,
                           linger_seconds=linger)
    try:
        shipper.run(follow=follow)
    except KeyboardInterrupt:
        pass
    finally:
        shipper.close()
    offsets = ", ".join(f"{p}:{o}" for p, o in sorted(shipper.committed.items())) or "none"
    typer.echo(f"shipped {shipper.records} records of {source} (group {shipper.group_id}), "
               f"next offsets {offsets}", err=True)
