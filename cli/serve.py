"""`cachescope serve (--store DIR | --clickhouse URL) [--port N] [--host H]`: the REST API."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.app import app


@app.command()
def serve(
    store: Optional[Path] = typer.Option(None, "--store", help="embedded store directory (what `cachescope replay` wrote)"),
    clickhouse: Optional[str] = typer.Option(None, "--clickhouse", help="ClickHouse server, clickhouse://host:9000"),
    database: str = typer.Option("cachescope", "--database", help="database in the store"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="port to listen on"),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level"),
) -> None:
    """Serve the REST API (and the built-in page) over the store. Tokens: CACHESCOPE_API_TOKENS."""
    import sys

    def fail(message: str, code: int) -> typer.Exit:
        typer.echo(f"serve: {message}", err=True)
        return typer.Exit(code)

    if (store is None) == (clickhouse is None):
        raise fail("give exactly one of --store DIR or --clickhouse URL", 2)
    if store is not None and not store.is_dir():
        raise fail(f"no store at {store}: write one with `cachescope replay --store {store} …`", 2)

    import uvicorn
    from pydantic import ValidationError

    from api.core.config import Settings, SettingsError
    from api.deps import StorePool
    from api.main import create_app
    from cachescope.store import StoreError

    try:
        settings = Settings(store_dir=store, clickhouse_url=clickhouse, database=database, host=host)
        settings.check()
    except ValidationError as e:
        first = e.errors()[0]
        raise fail(f"setting {'.'.join(map(str, first['loc']))}: {first['msg']}", 2) from None
    except SettingsError as e:
        raise fail(str(e), 2) from None
    where = f"store {store}" if store is not None else f"ClickHouse {clickhouse}"
    try:
        stores = StorePool(settings)  # open before listening: /healthz answers 200 from the first request
    except (StoreError, OSError, ValueError, EOFError) as e:
        raise fail(f"cannot open {where}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", 1) from None
    application = create_app(settings, stores)
    if settings.open_access:
        typer.echo(f"serve: no API tokens configured: serving OPEN (no authentication) on {host}:{port} "
                   "(loopback only); set CACHESCOPE_API_TOKENS to require tokens", err=True)
    typer.echo(f"serve: {where}, database {database}: http://{host}:{port}/v1 (OpenAPI at /docs)", err=True)
    from api.connections import guarded_protocol

    # uvicorn's own h11 protocol has no header or body timeout: ours adds them and the connection cap
    config = uvicorn.Config(application, host=host, port=port, log_level=log_level, lifespan="on",
                            http=guarded_protocol(settings.header_timeout_seconds, settings.body_timeout_seconds,
                                                  settings.max_connections),
                            timeout_keep_alive=settings.keep_alive_seconds,
                            h11_max_incomplete_event_size=settings.max_header_bytes)
    server = uvicorn.Server(config)
    try:
        server.run()
    except SystemExit as e:  # uvicorn exits when it cannot bind (it logged why)
        if e.code not in (0, None):
            raise fail(f"cannot listen on {host}:{port}: the port is in use or the address is not this host's", 1) from None
    except (StoreError, OSError, ValueError) as e:
        raise fail(f"{where}: {e}", 1) from None
    if not server.started:
        # uvicorn logs a failed start-up (store unreachable, port in use) and returns
        sys.exit(1)
