"""`cachescope ship`: follow a log file into Kafka, exactly once, rejects to a dead-letter topic."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cachescope.cli.app import app


@app.command()
def ship(
    fmt: Annotated[str, typer.Option("--format", help="log format (see `cachescope parse --help`)")],
    source: Annotated[str, typer.Option("--from", help="log file to follow")],
    to: Annotated[str, typer.Option("--to", help="kafka://HOST:PORT/TOPIC")],
    site: Annotated[str, typer.Option(help="site name")] = "",
    config: Annotated[Optional[str], typer.Option(help="site configuration YAML")] = None,
    state: Annotated[Optional[str], typer.Option(help="local mirror of the read position (JSON)")] = None,
    shipper_id: Annotated[Optional[str], typer.Option(help="stable name of this shipper (default host:path)")] = None,
    dead_letter: Annotated[Optional[str], typer.Option(help="topic for rejected lines (default TOPIC.rejects)")] = None,
    batch: Annotated[int, typer.Option(help="lines per Kafka transaction at most")] = 1000,
    linger: Annotated[float, typer.Option(help="seconds a partial batch may wait")] = 1.0,
    follow: Annotated[bool, typer.Option("--follow/--no-follow", help="keep following the file (tail -F)")] = True,
    metrics_port: Annotated[Optional[int], typer.Option(help="serve Prometheus metrics on this port")] = None,
) -> None:
    """Ship FILE's accesses to Kafka as batched AccessEvent messages keyed by cache group."""
    from cachescope.config import load_config
    from ingest.shipper import Shipper

    if metrics_port:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr="127.0.0.1")
    shipper = Shipper(fmt, source, to, config=load_config(config), site=site, shipper_id=shipper_id,
                      state_file=state, dead_letter_topic=dead_letter, batch_events=batch, linger_seconds=linger)
    try:
        pos = shipper.run(follow=follow)
    except KeyboardInterrupt:
        pos = shipper.pos
    finally:
        shipper.close()
    typer.echo(f"shipped {source} up to line {pos.line} (byte {pos.offset}), next seq {pos.seq}", err=True)
