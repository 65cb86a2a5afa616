"""`cachescope collect (--listen udp://HOST:PORT [--allow CIDR[,CIDR…]] | --from amqp://…) [--site S]
(--out FILE|- | --to kafka://HOST:PORT/TOPIC) [--stop-after-idle DURATION]`: XRootD's UDP monitoring,
received as it is sent or as OSG's shoveler publishes it to a message bus (cli/_collect_bus.py),
into AccessEvents.

`--allow` (or `collect.allow` in the config) names the servers whose monitoring counts; on loopback
the loopback range is allowed without it, anywhere else it is required (exit 2 without it). From a
bus, whose publishers the broker authenticates, every `remote` counts unless `--allow` is given.
Both sources go through one path: with a spool (always for `--from`: each message is spooled before
it is acked) decoding reads the spool, and checkpoints and restarts are the same.

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
    listen: Optional[str] = typer.Option(None, "--listen", help="udp://HOST:PORT to receive XRootD's monitoring on "
                                                              "(xrootd.monitor ... dest ... HOST:PORT)"),
    from_: Optional[str] = typer.Option(None, "--from", metavar="amqp://USER:PASS@HOST:PORT/VHOST",
                                        help="consume the shoveler's messages from this AMQP broker "
                                             "(?exchange=shoveled-xrd&queue=cachescope-collect&routing_key=%23), "
                                             "or stomp://USER:PASS@HOST:PORT/topic/NAME"),
    exchange: Optional[str] = typer.Option(None, "--exchange", help="--from: the exchange the shoveler publishes "
                                           "to (default shoveled-xrd, the shoveler's)"),
    queue: Optional[str] = typer.Option(None, "--queue", help="--from: the durable queue to consume "
                                        "(default cachescope-collect)"),
    routing_key: Optional[str] = typer.Option(None, "--routing-key", help="--from: the queue's binding key (default #)"),
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
    spool: Optional[Path] = typer.Option(None, "--spool", metavar="DIR", help="spool every datagram to DIR "
                                         "(fsynced) before decoding it (--from: before acking it; default "
                                         "FILE.spool beside --out FILE); a restart (after a kill too) decodes "
                                         "from where the last write or Kafka transaction stood"),
) -> None:
    """Receive XRootD's UDP monitoring (pfc g-stream, f-stream, trace, user and path maps) as AccessEvents."""
    from cachescope.config import load_config
    from cachescope.config.durations import parse_duration_us
    from cachescope.errors import UsageError
    from cli import _checks
    from ingest.xrootd_monitoring.receiver import parse_listen

    if (out is None) == (to is None):
        raise UsageError("give exactly one of --out FILE|- or --to kafka://HOST:PORT/TOPIC")
    if (listen is None) == (from_ is None):
        raise UsageError("give exactly one of --listen udp://HOST:PORT or --from amqp://USER:PASS@HOST:PORT/VHOST "
                         "(or stomp://USER:PASS@HOST:PORT/topic/NAME)")
    if from_ is None and (exchange, queue, routing_key) != (None, None, None):
        raise UsageError("--exchange, --queue and --routing-key go with --from amqp://…")
    if from_ is not None:
        from cli._collect_bus import bus_settings

        bus, Source, default_id = bus_settings(from_, exchange=exchange, queue=queue, routing_key=routing_key)
    if from_ is not None and spool is None:
        if out is None or out == "-":
            raise UsageError("--from with --to or --out -: give --spool DIR (each message is on disk there "
                             "before it is acked; a restart goes on from it without losing or repeating an access)")
        spool = Path(out + ".spool")
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
    from ingest.xrootd_monitoring.senders import Senders, parse_allow, resolve

    allowed = allow if allow is not None else cfg.collect.allow
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

    import os

    from cachescope.errors import UserError
    from ingest.xrootd_monitoring.run import Checkpoints, receiver_metrics

    assembler = None

    def on_malformed(reason: str, body: bytes, n: int) -> None:  # a bus message that holds no datagram
        assembler.stats.dropped["message"] += 1
        on_reject({"message": n, "reason": f"bus message: {reason}", "text": body[:32].hex(), "skipped": False})

    if from_ is not None:
        senders = Senders(parse_allow(allowed) or None)
        # connected and subscribed before anything is announced: an unreachable broker fails here
        receiver = Source(bus, spool, on_malformed=on_malformed)
        where = f"consuming {bus.where}"
    else:
        host, port = parse_listen(listen)
        senders = Senders(resolve(host, allowed))
        try:
            receiver = Receiver(host, port, spool=spool, rcvbuf=cfg.ingest.receive_buffer_bytes)  # bound before anything is announced: a busy port fails here
        except OSError as exc:
            raise UserError(f"cannot use the spool {spool}: {exc.strerror or exc}") from None
        default_id = f"{host}:{receiver.address[1]}"
        where = None
    sp = cfg.ingest.spool
    resumed = None
    kafka = None
    on_flush = None
    try:
        if to is not None:
            cid = collector_id or default_id
            kafka = KafkaOut(to, cid)
            kafka.extra = lambda: receiver_metrics(receiver)
            sink = kafka
            assembler = Assembler(cfg, site=site, on_reject=on_reject, seq_of=kafka.seq_of, senders=senders)
            if spool is not None:
                checkpoints = Checkpoints(spool, "kafka", max_bytes=sp.max_bytes, max_age_s=sp.max_age_s)
                kafka.spool = (receiver, checkpoints)
                if kafka.spool_pos is not None:
                    saved = checkpoints.load(kafka.spool_pos)
                    if saved is None:
                        typer.echo(f"collect: no checkpoint in {spool} for the position Kafka's last transaction "
                                   f"names ({kafka.spool_pos}): decoding from there with numbering continued",
                                   err=True)
                    else:
                        assembler.load_state(saved["assembler"])
                    receiver.resume(max(kafka.spool_pos, receiver.pos))
                    resumed = receiver.pos
        else:
            try:
                stream = sys.stdout.buffer if out == "-" else open(out, "ab")  # noqa: SIM115
            except OSError as exc:
                raise UsageError(f"cannot write --out {out}: {exc.strerror or exc}") from None
            sink = LinesOut(stream)
            assembler = Assembler(cfg, site=site, on_reject=on_reject, senders=senders)
            if spool is not None:
                import stat

                regular = out != "-" and stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
                checkpoints = Checkpoints(spool, "out", max_bytes=sp.max_bytes, max_age_s=sp.max_age_s)
                saved = checkpoints.load()
                if saved is not None:
                    assembler.load_state(saved["assembler"])
                    receiver.resume(saved["pos"])
                    resumed = saved["pos"]
                    size = (saved["sink"] or {}).get("out_size")
                    if regular and size is not None:
                        have = os.fstat(stream.fileno()).st_size
                        if have < size:
                            raise UserError(f"--out {out}: {have:,} bytes, shorter than the {size:,} the spool's "
                                            f"checkpoint in {spool} says were written; give the whole file back "
                                            f"(or another --out and --spool to start afresh)")
                        # what the previous run wrote after its last checkpoint comes again from the spool
                        stream.truncate(size)

                def on_flush() -> None:  # the lines are on disk before the checkpoint says so
                    size = None
                    if regular:
                        os.fsync(stream.fileno())
                        size = os.fstat(stream.fileno()).st_size
                    checkpoints.save(receiver.pos, assembler, {"out_size": size})
                    checkpoints.done(receiver.pos)

        collector = Collector(receiver, assembler, sink, idle_seconds=idle, on_flush=on_flush)

        def on_signal(signum, frame) -> None:
            collector.stop.set()

        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, on_signal)
        receiver.start()  # returns once the receiving process receives
        if where is None:
            where = (f"listening on udp://{receiver.address[0]}:{receiver.address[1]} "
                     f"(receive buffer {receiver.rcvbuf >> 20} MiB)")
        if resumed is not None:
            where += f" (resumed from the spool's checkpoint at position {resumed:,})"
        typer.echo(f"collect: {where}", err=True)
        try:
            collector.run()
        except BrokenPipeError:
            return
    finally:
        receiver.stop()
        if from_ is not None:
            receiver.close()
        if kafka is not None:
            kafka.close()
        if stats and assembler is not None:
            doc = {**assembler.stats.as_dict(assembler.streams), **receiver_metrics(receiver)}
            if from_ is not None:
                doc["bus"] = {"messages": receiver.messages, "malformed": receiver.malformed,
                              "redelivered_duplicates": receiver.duplicates, "acked": receiver.acked}
            sys.stderr.buffer.write(orjson.dumps({"stats": doc}) + b"\n")
        if rejects:
            reject_out.close()
        else:
            reject_out.flush()
    st = assembler.stats
    why = "idle" if collector.stopped_idle else "stopped"
    if from_ is not None:
        typer.echo(f"collect: {why}: {receiver.messages} messages ({receiver.malformed} malformed, "
                   f"{receiver.duplicates} redelivered duplicates), {st.datagrams} datagrams, {st.events} events, "
                   f"{st.lost} lost in sequence gaps", err=True)
        return
    typer.echo(f"collect: {why}: {st.datagrams} datagrams, {st.events} events, {st.lost} lost in sequence gaps, "
               f"{sum(st.dropped.values())} undecodable, {st.duplicates} duplicates, {st.refused} from senders not "
               f"allowed, {st.conflicts} conflicting, {receiver.kernel_drops()} dropped by the kernel "
               "(receive buffer full)", err=True)
