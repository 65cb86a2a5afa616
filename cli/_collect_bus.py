"""`cachescope collect --from amqp://…|stomp://…`: the shoveler's messages from a bus, through the
same decoder and loop as `--listen` (ingest/xrootd_monitoring/bus.py), acked only once their events
are durable (bus_checkpoint.py)."""

from __future__ import annotations

import os
import signal
import stat
import sys
from pathlib import Path

import typer

from cachescope.errors import UsageError, UserError


def collect_bus(url: str, *, cfg, site: str, out: str | None, to: str | None, idle: float | None,
                rejects: Path | None, stats: bool, collector_id: str | None, exchange: str | None,
                queue: str | None, routing_key: str | None, checkpoint: Path | None, senders=None) -> None:
    import orjson

    from ingest.xrootd_monitoring.assemble import Assembler
    from ingest.xrootd_monitoring.bus import AmqpSource, StompSource, parse_from, parse_stomp
    from ingest.xrootd_monitoring.bus_checkpoint import Checkpoint
    from ingest.xrootd_monitoring.run import Collector, KafkaOut, LinesOut

    if url.startswith("stomp://"):
        if (exchange, queue, routing_key) != (None, None, None):
            raise UsageError("--exchange, --queue and --routing-key are AMQP's: with stomp:// the destination is "
                             "the URL's path (stomp://USER:PASS@HOST:PORT/topic/NAME)")
        settings, Source = parse_stomp(url), StompSource
        default_id = settings.ident
    else:
        settings, Source = parse_from(url, exchange=exchange, queue=queue, routing_key=routing_key), AmqpSource
        default_id = f"amqp:{settings.host}:{settings.port}/{settings.queue}"
    if checkpoint is None:
        if out is None or out == "-":
            raise UsageError("--from with --to or --out -: give --checkpoint FILE (the decoder's state that lets "
                             "a restart go on without losing or repeating an access)")
        checkpoint = Path(out + ".checkpoint")
    ckpt = Checkpoint(checkpoint)

    try:
        reject_out = open(rejects, "wb") if rejects else sys.stderr.buffer  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot write --rejects {rejects}: {exc.strerror or exc}") from None

    def on_reject(doc: dict) -> None:
        reject_out.write(orjson.dumps(doc) + b"\n")

    kafka = None
    stream = None
    if to is not None:
        kafka = KafkaOut(to, collector_id or default_id)
        sink = kafka
        assembler = Assembler(cfg, site=site, on_reject=on_reject, seq_of=kafka.seq_of, senders=senders)
    else:
        assembler = Assembler(cfg, site=site, on_reject=on_reject, senders=senders)
    restored = ckpt.load(assembler)
    if to is None:
        if out == "-":
            stream = sys.stdout.buffer
        else:
            try:
                stream = open(out, "ab")  # noqa: SIM115
                if restored and ckpt.out_size is not None:
                    size = os.fstat(stream.fileno()).st_size
                    if size < ckpt.out_size:
                        raise UserError(f"--out {out}: {size:,} bytes, shorter than the {ckpt.out_size:,} its "
                                        f"checkpoint {checkpoint} holds; give the whole file back (or another "
                                        f"--out and --checkpoint to start afresh)")
                    # what the previous run wrote after its last checkpoint comes again from the
                    # messages the broker redelivers
                    stream.truncate(ckpt.out_size)
            except OSError as exc:
                raise UsageError(f"cannot write --out {out}: {exc.strerror or exc}") from None
        sink = LinesOut(stream)
    regular = stream is not None and stat.S_ISREG(os.fstat(stream.fileno()).st_mode)

    def on_malformed(reason: str, body: bytes, n: int) -> None:
        assembler.stats.dropped["message"] += 1
        on_reject({"message": n, "reason": f"bus message: {reason}", "text": body[:32].hex(), "skipped": False})

    def commit() -> None:
        """After a sink flush: the output fsynced, the decoder's state checkpointed, then the ack."""
        ckpt.commit(assembler, source, stream if regular else None)

    def on_quiet() -> None:  # messages that gave nothing to flush (malformed, skipped): checkpointed and acked
        sink.flush(assembler)
        commit()

    source = Source(settings, on_malformed=on_malformed, skip=lambda d: ckpt.holds(d.body, d.redelivered),
                        on_quiet=on_quiet)
    collector = Collector(source, assembler, sink, idle_seconds=idle, on_flush=commit)

    def on_signal(signum, frame) -> None:
        collector.stop.set()

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    typer.echo(f"collect: consuming {settings.where}" + (f" (restored from {checkpoint})" if restored else ""),
               err=True)
    try:
        try:
            collector.run()
        except BrokenPipeError:
            return
    finally:
        source.close()
        if kafka is not None:
            kafka.close()
        if stats:
            doc = assembler.stats.as_dict(assembler.streams)
            doc["bus"] = {"messages": source.messages, "malformed": source.malformed,
                          "redelivered_duplicates": source.duplicates, "acked": source.acked}
            sys.stderr.buffer.write(orjson.dumps({"stats": doc}) + b"\n")
        if rejects:
            reject_out.close()
        else:
            reject_out.flush()
    st = assembler.stats
    why = "idle" if collector.stopped_idle else "stopped"
    typer.echo(f"collect: {why}: {source.messages} messages ({source.malformed} malformed, {source.duplicates} "
               f"redelivered duplicates), {st.datagrams} datagrams, {st.events} events, {st.lost} lost in "
               f"sequence gaps", err=True)
