"""`cachescope collect --listen udp://HOST:PORT [--allow CIDR[,CIDR…]] [--site S] (--out FILE|- | --to
kafka://HOST:PORT/TOPIC) [--stop-after-idle DURATION]`: XRootD's UDP monitoring, received as it is sent,
into AccessEvents.

`--allow` (or `collect.allow` in the config) names the servers whose monitoring counts; on loopback
the loopback range is allowed without it, anywhere else it is required (exit 2 without it).

`--out` writes AccessEvent JSON lines (as `cachescope parse` prints them; rejects with their reason
as JSON lines on stderr or --rejects); `--to` ships them to Kafka in transactions (as `cachescope
ship`). SIGINT/SIGTERM or `--stop-after-idle` end it: everything received is written, exit 0.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Optional

import typer

from cli.app import app


@app.command()
def collect(
    listen: str = typer.Option(..., "--listen", help="udp://HOST:PORT to receive XRootD's monitoring on "
                                                     "(xrootd.monitor ... dest ... HOST:PORT)"),
    allow: Optional[str] = typer.Option(None, "--allow", metavar="CIDR[,CIDR…]", help="senders whose monitoring "
                                        "counts (others are counted and dropped); default: collect.allow, else "
                                        "127.0.0.0/8 and ::1 on a loopback --listen"),
    site: str = typer.Option("", "--site", help="site name for every event (default: the server's, else the config's)"),
    out: Optional[str] = typer.Option(None, "--out", help="write AccessEvent JSON lines to FILE, or '-' for stdout"),
    to: Optional[str] = typer.Option(None, "--to", help="ship to kafka://HOST:PORT/TOPIC, exactly once"),
    stop_after_idle: Optional[str] = typer.Option(None, "--stop-after-idle", metavar="DURATION",
                                                  help="exit 0 when nothing arrived for this long (5s, 1m)"),
    config: Optional[Path] = typer.Option(None, "--config", help="cachescope YAML config"),
    rejects: Optional[Path] = typer.Option(None, "--rejects", help="write rejects here instead of stderr"),
    stats: bool = typer.Option(False, "--stats", help='finish with one {"stats": {...}} JSON line on stderr'),
    collector_id: Optional[str] = typer.Option(None, "--collector-id", help="stable name of this collector for "
                                               "--to (default HOST:PORT of --listen)"),
) -> None:
    """Receive XRootD's UDP monitoring (pfc g-stream, f-stream, trace, user and path maps) as AccessEvents."""
    from cachescope.config import load_config
    from cachescope.config.durations import parse_duration_us
    from cachescope.errors import UsageError
    from cli import _checks
    from ingest.xrootd_monitoring.receiver import parse_listen

    if (out is None) == (to is None):
        raise UsageError("give exactly one of --out FILE|- or --to kafka://HOST:PORT/TOPIC")
    host, port = parse_listen(listen)
    idle = None
    if stop_after_idle is not None:
        try:
            idle = parse_duration_us(stop_after_idle) / 1e6
        except ValueError as exc:
            raise UsageError(f"--stop-after-idle: {exc}") from None
        if idle <= 0:
            raise UsageError(f"--stop-after-idle {stop_after_idle!r}: must be more than 0")
    try:
        cfg = load_config(config)
    except Exception as exc:  # noqa: BLE001 - any config problem is a usage error
        raise UsageError(f"config {config}: {exc}") from None
    from ingest.xrootd_monitoring.senders import Senders, resolve

    senders = Senders(resolve(host, allow if allow is not None else cfg.collect.allow))
    if to is not None:
        bootstrap, _ = _checks.kafka_url(to, "--to")
        _checks.kafka_reachable(bootstrap, "--to")

    import orjson

    from ingest.xrootd_monitoring.assemble import Assembler
    from ingest.xrootd_monitoring.receiver import Receiver
    from ingest.xrootd_monitoring.run import Collector, KafkaOut, LinesOut

    try:
        reject_out = open(rejects, "wb") if rejects else sys.stderr.buffer  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot write --rejects {rejects}: {exc.strerror or exc}") from None

    def on_reject(doc: dict) -> None:
        reject_out.write(orjson.dumps(doc) + b"\n")

    receiver = Receiver(host, port)  # bound before anything is announced: a busy port fails here
    kafka = None
    try:
        if to is not None:
            kafka = KafkaOut(to, collector_id or f"{host}:{receiver.address[1]}")
            sink = kafka
            assembler = Assembler(cfg, site=site, on_reject=on_reject, seq_of=kafka.seq_of, senders=senders)
        else:
            try:
                stream = sys.stdout.buffer if out == "-" else open(out, "ab")  # noqa: SIM115
            except OSError as exc:
                raise UsageError(f"cannot write --out {out}: {exc.strerror or exc}") from None
            sink = LinesOut(stream)
            assembler = Assembler(cfg, site=site, on_reject=on_reject, senders=senders)
        collector = Collector(receiver, assembler, sink, idle_seconds=idle)

        def on_signal(signum, frame) -> None:
            collector.stop.set()

        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, on_signal)
        receiver.start()  # returns once the receiving process receives
        typer.echo(f"collect: listening on udp://{receiver.address[0]}:{receiver.address[1]} "
                   f"(receive buffer {receiver.rcvbuf >> 20} MiB)", err=True)
        try:
            collector.run()
        except BrokenPipeError:
            return
    finally:
        receiver.stop()
        if kafka is not None:
            kafka.close()
        if stats:
            sys.stderr.buffer.write(orjson.dumps({"stats": assembler.stats.as_dict(assembler.streams)}) + b"\n")
        if rejects:
            reject_out.close()
        else:
            reject_out.flush()
    st = assembler.stats
    why = "idle" if collector.stopped_idle else "stopped"
    typer.echo(f"collect: {why}: {st.datagrams} datagrams, {st.events} events, {st.lost} lost in sequence gaps, "
               f"{sum(st.dropped.values())} undecodable, {st.duplicates} duplicates, {st.refused} from senders not "
               f"allowed, {st.conflicts} conflicting", err=True)
