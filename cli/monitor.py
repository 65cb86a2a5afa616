"""`cachescope monitor`: Kafka consumer lag and the shippers' parse health into ClickHouse.

The Flink job's driver runs the same monitor as a thread (`--monitor-every`); this command runs
it on its own, e.g. beside a job submitted to a cluster (runners/monitor.py).
"""

from __future__ import annotations

from typing import List, Optional
from urllib.parse import urlparse

import typer

from cli.app import app


@app.command()
def monitor(
    bootstrap: str = typer.Option(..., "--bootstrap", help="Kafka bootstrap servers host:port"),
    clickhouse: str = typer.Option(..., "--clickhouse", help="server URL, clickhouse://host:port[/database]"),
    database: Optional[str] = typer.Option(None, "--database", help="database (default: the URL's, else cachescope)"),
    group: List[str] = typer.Option(["cachescope-shadow-caches"], "--group",
                                    help="consumer group whose lag to report (repeatable)"),
    topic: str = typer.Option("cachescope.events", "--topic", help="the events topic (its lag; its .health topic)"),
    every: str = typer.Option("15s", "--every", help="period between samples"),
    once: bool = typer.Option(False, "--once", help="take one sample, print the lag, exit"),
) -> None:
    """Sample consumer lag per partition into consumer_lag and forward the shippers' parse health
    into pipeline_health, every EVERY until interrupted."""
    from cachescope.config.durations import parse_duration_us
    from cli import _checks

    try:
        period = parse_duration_us(every) / 1e6
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--every") from None
    if period <= 0:
        raise typer.BadParameter("must be positive", param_hint="--every")
    _checks.kafka_reachable(bootstrap, "--bootstrap")
    _checks.clickhouse_answers(clickhouse)
    from cachescope.store import open_store
    from ingest.health import health_topic
    from runners.monitor import PipelineMonitor
    url = clickhouse.rstrip("/")
    db = database or (urlparse(url).path.strip("/") or "cachescope")  # query settings stay in the URL
    with open_store(clickhouse_url=clickhouse, database=db) as store:
        mon = PipelineMonitor(bootstrap, store, {g: [topic] for g in group}, [health_topic(topic)], period)
        try:
            if once:
                for s in mon.tick():
                    typer.echo(f"{s.consumer_group}\t{s.topic}/{s.partition}\tcommitted {s.committed_offset}\t"
                               f"end {s.end_offset}\tlag {s.lag}")
                return
            mon._run()  # until Ctrl-C
        finally:
            mon.close()
