"""`cachescope migrate`: create or update the ClickHouse schema (numbered migrations)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.app import app


@app.command()
def migrate(
    store: Optional[Path] = typer.Option(None, "--store", help="embedded store directory (chDB)"),
    clickhouse: Optional[str] = typer.Option(None, "--clickhouse", help="server URL, clickhouse://host:port"),
    database: str = typer.Option("cachescope", "--database", help="database to create/migrate"),
    events_ttl_days: int = typer.Option(90, "--events-ttl-days", min=0, help="access_events TTL at creation, counted from each event's time (0: keep)"),
    health_ttl_days: int = typer.Option(30, "--health-ttl-days", min=0, help="pipeline_health TTL at creation"),
    show: bool = typer.Option(False, "--status", help="list migrations and whether applied; change nothing"),
) -> None:
    """Apply the migrations in deploy/clickhouse/migrations/ not yet applied to DATABASE."""
    from cachescope.store import StoreError, open_store
    from cachescope.store import migrations as m

    if (store is None) == (clickhouse is None):
        raise typer.BadParameter("give exactly one of --store DIR or --clickhouse URL")
    from cli import _checks

    _checks.database_name(database)
    if clickhouse is not None:  # a malformed URL, a closed port or a server that never answers: one line
        _checks.clickhouse_answers(clickhouse)
    elif store.exists() and not store.is_dir():
        raise typer.BadParameter(f"{store} is a file; give a directory (created when missing)", param_hint="--store")
    try:
        with open_store(store_dir=store, clickhouse_url=clickhouse, database=database) as st:
            if show:
                for s in m.status(st):
                    when = s.applied_at.isoformat() if s.applied_at else "pending"
                    typer.echo(f"{s.migration.label}\t{when}")
                return
            ran = m.migrate(st, events_ttl_days=events_ttl_days, health_ttl_days=health_ttl_days)
    except (m.MigrationError, StoreError) as e:
        from cachescope.errors import UserError

        raise UserError(f"{clickhouse or store}: {e}") from None
    for mig in ran:
        typer.echo(f"applied {mig.label}")
    typer.echo(f"{database}: {len(ran)} migration(s) applied, schema up to date")
