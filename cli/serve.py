"""`cachescope serve (--store DIR | --clickhouse URL) [--port N] [--host H]`: the REST API.

`--collect udp://HOST:PORT` (with --store): the live embedded mode for a site without Kafka and
Flink: XRootD's UDP monitoring is received, run through the shadow caches and written into the
store by the serving process itself (runners/live.py), while the API and the page serve it."""

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
    collect: Optional[str] = typer.Option(None, "--collect", help="also receive XRootD's UDP monitoring on "
                                          "udp://HOST:PORT into the --store (live, one process)"),
    allow: Optional[str] = typer.Option(None, "--allow", metavar="CIDR[,CIDR…]", help="with --collect: senders "
                                        "whose monitoring counts (default: collect.allow, else the loopback range "
                                        "on a loopback --collect address)"),
    site: str = typer.Option("", "--site", help="with --collect: site name for every event"),
    config: Optional[Path] = typer.Option(None, "--config", help="with --collect: site configuration YAML "
                                          "(pipeline: caches, windows; cache groups)"),
) -> None:
    """Serve the REST API (and the built-in page) over the store. Tokens: CACHESCOPE_API_TOKENS."""
    import sys

    def fail(message: str, code: int) -> typer.Exit:
        typer.echo(f"serve: {message}", err=True)
        return typer.Exit(code)

    if (store is None) == (clickhouse is None):
        raise fail("give exactly one of --store DIR or --clickhouse URL", 2)
    listen = None
    if collect is not None:
        from cachescope.config import load_config
        from ingest.xrootd_monitoring.receiver import parse_listen

        if store is None:
            raise fail("--collect writes into an embedded --store DIR (with a ClickHouse server, run "
                       "`cachescope collect --to kafka://…` and the streaming job)", 2)
        listen = parse_listen(collect)
        try:
            cfg = load_config(config)
        except Exception as exc:  # noqa: BLE001 - any config problem is a usage error
            raise fail(f"config {config}: {exc}", 2) from None
        from cachescope.errors import UsageError
        from ingest.xrootd_monitoring.senders import resolve

        try:  # the collector's Assembler takes its allow-list from here
            cfg.collect.allow = [str(n) for n in resolve(listen[0], allow if allow is not None else cfg.collect.allow,
                                                         listen="--collect")]
        except UsageError as exc:
            raise fail(str(exc), 2) from None
        try:
            store.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise fail(f"cannot create the store directory {store}: {exc.strerror}", 2) from None
    elif site or config is not None or allow is not None:
        raise fail("--site, --config and --allow go with --collect", 2)
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
    live = None
    if listen is not None:
        from api.metrics import CollectMetrics
        from cachescope.store import migrations
        from runners.live import LiveCollector

        from cachescope.errors import UserError

        problem = None
        with stores.get() as st:
            migrations.migrate(st)
            try:
                live = LiveCollector(listen, cfg, st, site=site, rejects=store / "rejects.jsonl", spool=store / "spool")
            except OSError as e:
                problem = f"cannot use the spool {store / 'spool'}: {e.strerror or e}"
            except UserError as e:  # an unreadable checkpoint
                problem = str(e)
        if problem is not None:
            stores.close()  # the embedded store closed before exit (chDB must not be left open)
            raise fail(problem, 1)
    application = create_app(settings, stores)
    application.state.keep_series_fresh = True  # the first /v1/efficiency finds its table copy loaded
    if live is not None:
        # the store stays open past the app's shutdown (the app closes only stores it opened):
        # the collector writes what it received last, then it is closed below
        application.state.stores = stores
        application.state.live = live  # /healthz answers 503 once ingestion stopped
        application.state.metrics.registry.register(CollectMetrics(live.assembler, live.receiver, live))
        live.start()
        typer.echo(f"serve: collecting XRootD monitoring on udp://{live.receiver.address[0]}:"
                   f"{live.receiver.address[1]} into {store}", err=True)
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
    if live is not None:
        import signal

        # uvicorn stops on SIGINT/SIGTERM and then raises the signal again for the handler it found:
        # let that be this no-op, so what was received is written below and serve exits 0
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: None)
    try:
        server.run()
    except SystemExit as e:  # uvicorn exits when it cannot bind (it logged why)
        if e.code not in (0, None):
            raise fail(f"cannot listen on {host}:{port}: the port is in use or the address is not this host's", 1) from None
    except (StoreError, OSError, ValueError) as e:
        raise fail(f"{where}: {e}", 1) from None
    finally:
        if live is not None:  # everything received goes through the caches into the store
            live.stop()
            st = live.assembler.stats
            typer.echo(f"serve: collected {st.datagrams} datagrams, {st.events} events, {st.lost} lost in "
                       f"sequence gaps, {sum(st.dropped.values())} undecodable", err=True)
            stores.close()
            if live.error is not None:
                raise fail(f"collect: {live.error}", 1)
    if not server.started:
        # uvicorn logs a failed start-up (store unreachable, port in use) and returns
        sys.exit(1)
