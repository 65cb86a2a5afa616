"""`cachescope collect --from amqp://…` against a real RabbitMQ (Debian's rabbitmq-server, started by
scripts/services): the messages OSG's xrootd-monitoring-shoveler publishes, decoded as the UDP path
decodes their datagrams, acked only once they are in the collector's spool (fsynced): from there on
decoding, checkpoints and restarts are the spool's, as for `--listen` (test_spool.py).

Fixture `xrootd_shoveler_fstream_pelican_use_case.jsonl`: OSG's xrootd-monitoring-shoveler repository,
tests/use_case (a real Pelican 7.16 cache's f-stream, as the shoveler published it). Its two messages
from 129.93.239.167 are given the loopback address here (same port): a reverse lookup of a public
address would leave the host, and the tests' traffic stays on loopback.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from cachescope.config import load_config
from cachescope.events import encode_lines
from ingest.xrootd_monitoring.assemble import Assembler
from ingest.xrootd_monitoring.capture import read_capture
from ingest.xrootd_monitoring.bus import AmqpSource, parse_from
from support.services import unique_name

pika = pytest.importorskip("pika")

CLI = str(Path(sys.executable).parent / "cachescope")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PELICAN = FIXTURES / "xrootd_shoveler_fstream_pelican_use_case.jsonl"
LAB = Path(__file__).resolve().parents[5] / "shared" / "xcache-lab" / "captures"
if not LAB.is_dir():
    LAB = Path("/work/shared/xcache-lab/captures")
RUN1 = LAB / "run1-default" / "udp.bin.gz"

pytestmark = pytest.mark.services


def loopback(remote: str) -> str:
    return "127.0.0.1:" + remote.rsplit(":", 1)[1]


def pelican_messages() -> list[bytes]:
    out = []
    for line in PELICAN.read_text().splitlines():
        doc = json.loads(line)
        doc["remote"] = loopback(doc["remote"])
        out.append(orjson.dumps(doc))
    return out


def shoveled(datagrams: list[bytes], remote: str = "127.0.0.1:40001") -> list[bytes]:
    """Datagrams as the shoveler publishes them."""
    return [orjson.dumps({"remote": remote, "version": "v1.4.0", "data": base64.b64encode(d).decode()})
            for d in datagrams]


def direct(messages: list[bytes]) -> list[dict]:
    """The same datagrams through the Assembler as the UDP path feeds it, in the same order."""
    asm = Assembler(load_config(None))
    events = []
    for m in messages:
        doc = orjson.loads(m)
        events += asm.feed(base64.b64decode(doc["data"]), doc["remote"].rsplit(":", 1)[0])
    events += asm.finish()
    return [orjson.loads(ln) for ln in encode_lines(events).splitlines()]


class Bus:
    """An exchange and a durable queue of the test's own on the real broker."""

    def __init__(self, rabbitmq, request):
        self.url = rabbitmq.url
        self.exchange = unique_name(request, "x")
        self.queue = unique_name(request, "q")
        self.conn = pika.BlockingConnection(pika.URLParameters(self.url))
        self.ch = self.conn.channel()
        # as the bus a shoveler publishes to has them: the queue exists before the first message
        self.ch.exchange_declare(self.exchange, exchange_type="topic", durable=True)
        self.ch.queue_declare(self.queue, durable=True)
        self.ch.queue_bind(self.queue, self.exchange, routing_key="#")
        self.ch.confirm_delivery()

    @property
    def source(self) -> str:
        return f"{self.url}?exchange={self.exchange}&queue={self.queue}"

    def publish(self, bodies) -> None:
        for b in bodies:  # the shoveler's way: its exchange, an empty routing key, confirmed
            self.ch.basic_publish(self.exchange, "", b, pika.BasicProperties(content_type="text/plain",
                                                                             delivery_mode=2))

    def depth(self) -> tuple[int, int]:
        """(messages ready, consumers) of the queue."""
        q = self.ch.queue_declare(self.queue, passive=True).method
        return q.message_count, q.consumer_count

    def close(self) -> None:
        self.ch.queue_delete(self.queue)
        self.ch.exchange_delete(self.exchange)
        self.conn.close()


@pytest.fixture
def bus(rabbitmq, request):
    b = Bus(rabbitmq, request)
    yield b
    b.close()


def collect(bus: Bus, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [CLI, "collect", "--from", bus.source, "--out", str(out), "--rejects", str(out) + ".rejects", "--stats",
         *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def finished(p: subprocess.Popen) -> tuple[dict, str]:
    _, err = p.communicate()
    err = err.decode()
    assert p.returncode == 0, err
    assert "Traceback" not in err
    stats = next(json.loads(ln)["stats"] for ln in err.splitlines() if ln.startswith('{"stats"'))
    return stats, err


def checkpointed(out: Path, name: str = "out") -> bool:
    """The spool beside --out FILE (FILE.spool) holds a checkpoint."""
    return any(Path(str(out) + ".spool").glob(f"{name}-*.state"))


def until_checkpointed(p: subprocess.Popen, out: Path) -> subprocess.Popen:
    """Its first checkpoint: something spooled, acked, decoded and written."""
    while not checkpointed(out):
        assert p.poll() is None, p.stderr.read().decode()
        time.sleep(0.01)  # polling for the file, not a delay before an assertion
    return p


def events_of(path: Path) -> list[dict]:
    return [orjson.loads(ln) for ln in path.read_bytes().splitlines()]


def test_the_pelican_capture_from_the_bus_gives_what_its_datagrams_give_directly(bus, tmp_path):
    messages = pelican_messages()
    bus.publish(messages)
    out = tmp_path / "out.jsonl"
    stats, _ = finished(collect(bus, out, "--stop-after-idle", "2s"))
    expected = direct(messages)
    assert expected, "the capture decodes to accesses"
    assert events_of(out) == expected  # the same events, in the same order
    assert stats["bus"]["messages"] == len(messages) == stats["datagrams"]
    assert stats["bus"]["acked"] == len(messages) and stats["bus"]["malformed"] == 0
    assert bus.depth()[0] == 0  # every message acked
    # the message's `remote` is the sender: its IP is the stream's address
    assert {s["address"] for s in stats["servers"]} == {"127.0.0.1"}


def test_a_lab_capture_from_the_bus_gives_the_events_of_the_udp_path(bus, tmp_path):
    messages = shoveled(read_capture(RUN1))
    bus.publish(messages)
    out = tmp_path / "out.jsonl"
    stats, _ = finished(collect(bus, out, "--stop-after-idle", "2s"))
    got = events_of(out)
    assert got == direct(messages)
    assert len(got) == 1000  # the capture's client reads (test_collect.ACCESSES)
    assert stats["lost_datagrams"] == 0 and stats["bus"]["acked"] == len(messages)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_kill_9_or_sigterm_mid_stream_and_a_restart_give_every_access_exactly_once(bus, tmp_path, sig):
    messages = shoveled(read_capture(RUN1))
    half = len(messages) // 2
    out = tmp_path / "out.jsonl"
    bus.publish(messages[:half])
    p = until_checkpointed(collect(bus, out), out)
    p.send_signal(sig)
    p.wait()
    p.stderr.close()
    p.stdout.close()
    assert p.returncode == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    bus.publish(messages[half:])
    stats, err = finished(collect(bus, out, "--stop-after-idle", "2s"))
    assert "resumed from the spool's checkpoint" in err
    got = events_of(out)
    expected = direct(messages)
    assert len(got) == len(expected) == 1000
    assert got == expected  # every access once, the same identities (origin, seq), the same order
    assert bus.depth()[0] == 0


def test_a_malformed_message_is_a_reject_with_its_reason_acked_and_counted(bus, tmp_path):
    good = shoveled(read_capture(RUN1)[:50])
    bad = [b"not json at all", orjson.dumps({"remote": "127.0.0.1:1", "version": "x"}),
           orjson.dumps({"remote": "127.0.0.1:1", "version": "x", "data": "%%% not base64 %%%"}),
           orjson.dumps({"version": "x", "data": "AAAA"}), orjson.dumps([1, 2])]
    bus.publish(good[:25] + bad + good[25:])
    out = tmp_path / "out.jsonl"
    stats, _ = finished(collect(bus, out, "--stop-after-idle", "2s"))
    rejects = [orjson.loads(ln) for ln in Path(str(out) + ".rejects").read_bytes().splitlines()]
    reasons = [r["reason"] for r in rejects if "message" in r]
    assert reasons == ["bus message: not JSON", "bus message: no 'data' (the base64 datagram)",
                       "bus message: 'data' is not base64", "bus message: no 'remote' (the sender's IP:PORT)",
                       "bus message: not a JSON object"]
    assert stats["bus"]["malformed"] == 5 and stats["dropped_datagrams"]["message"] == 5
    assert events_of(out) == direct(good)  # the pipeline went on
    assert bus.depth()[0] == 0 and stats["bus"]["acked"] == len(good) + len(bad)


def test_an_unreachable_broker_is_one_line_and_exit_1(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run([CLI, "collect", "--from", f"amqp://guest:guest@127.0.0.1:{port}/%2F", "--out",
                        str(tmp_path / "o")], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert f"127.0.0.1:{port}" in p.stderr


@pytest.mark.parametrize("args, what", [
    (["--from", "kafka://x:1/t", "--out", "-"], "expected amqp://"),
    (["--from", "amqp://h/%2F", "--listen", "udp://127.0.0.1:0", "--out", "-"], "exactly one of --listen"),
    (["--from", "amqp://h/%2F", "--out", "-"], "give --spool DIR"),
    (["--from", "amqp://h/%2F", "--to", "kafka://127.0.0.1:1/t"], "give --spool DIR"),
    (["--listen", "udp://127.0.0.1:0", "--queue", "q", "--out", "-"], "go with --from"),
    (["--from", "stomp://h:61613", "--out", "o"], "stomp://USER:PASS@HOST:PORT/topic/NAME"),
    (["--from", "stomp://h:61613/topic/t", "--queue", "q", "--out", "o"], "are AMQP's"),
    (["--from", "stomp://h:61613/topic/t?selector=x", "--out", "o"], "unknown parameter"),
])
def test_bus_usage_errors_are_one_line_and_exit_2(args, what):
    p = subprocess.run([CLI, "collect", *args], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert what in p.stderr and "Traceback" not in p.stderr


def _dying_run(bus: Bus, spool: Path, spooled: int) -> AmqpSource:
    """The collector's bus source in this process: it spools the first `spooled` deliveries
    (fsynced) and dies before acking them (the connection dropped: the broker requeues everything
    unacked), the window a kill -9 rarely hits, made to happen."""
    source = AmqpSource(parse_from(f"{bus.source}&prefetch={spooled}"), spool)
    while len(source._inbox) < spooled:  # the broker hands out `spooled` (its prefetch), no more
        source._pump(1.0)
    tag, n = source.spool_delivered()
    assert n == spooled and tag
    source.conn.close()
    source.close_spool()
    return source


def test_a_death_between_the_spool_and_the_ack_is_a_counted_duplicate_not_a_double(bus, tmp_path):
    """Run 1 spools 600 messages and dies before acking them; the broker redelivers all 600. The
    restarted `collect` decodes the 600 from the spool and skips their redeliveries (counted)."""
    messages = shoveled(read_capture(RUN1))
    bus.publish(messages)
    out = tmp_path / "out.jsonl"
    first = _dying_run(bus, Path(str(out) + ".spool"), 600)
    assert first.acked == 0 and bus.depth()[0] == len(messages)  # nothing acked: all on the queue
    stats, _ = finished(collect(bus, out, "--stop-after-idle", "2s"))
    assert stats["bus"]["redelivered_duplicates"] == 600
    assert stats["bus"]["messages"] == len(messages) == stats["datagrams"]  # 600 of them redelivered
    assert events_of(out) == direct(messages)
    assert bus.depth()[0] == 0


def test_two_deaths_in_a_row_keep_the_first_runs_spooled_messages_held(bus, tmp_path):
    """Run 1 dies holding 600 spooled, unacked messages; run 2 skips the 300 redeliveries the broker
    hands it and dies before acking them: all 600 must still be held for run 3."""
    messages = shoveled(read_capture(RUN1))
    bus.publish(messages)
    out = tmp_path / "out.jsonl"
    spool = Path(str(out) + ".spool")
    _dying_run(bus, spool, 600)
    source = AmqpSource(parse_from(f"{bus.source}&prefetch=300"), spool)
    while len(source._inbox) < 300:
        source._pump(1.0)
    assert source.spool_delivered()[1] == 300 and source.duplicates == 300  # nothing spooled again
    source.conn.close()
    source.close_spool()
    stats, _ = finished(collect(bus, out, "--stop-after-idle", "2s"))
    assert stats["bus"]["redelivered_duplicates"] == 600
    assert events_of(out) == direct(messages)


def test_lines_written_after_the_last_checkpoint_are_cut_back_on_restart(bus, tmp_path):
    """What a killed run wrote after its last checkpoint comes again from the spool: the restart cuts
    --out FILE back to the size the checkpoint holds, so no access is in the file twice."""
    messages = shoveled(read_capture(RUN1))
    half = len(messages) // 2
    out = tmp_path / "out.jsonl"
    bus.publish(messages[:half])
    p = until_checkpointed(collect(bus, out), out)
    p.send_signal(signal.SIGTERM)
    finished(p)
    written = out.read_bytes()
    assert written
    with open(out, "ab") as f:  # as a run killed between its write and its checkpoint leaves it
        f.write(written.splitlines(keepends=True)[-1])
    bus.publish(messages[half:])
    finished(collect(bus, out, "--stop-after-idle", "2s"))
    assert events_of(out) == direct(messages)


def test_to_kafka_kill_9_mid_stream_and_a_restart_give_every_identity_once(bus, kafka, kafka_topic, tmp_path):
    from support.services import topic_items

    messages = shoveled(read_capture(RUN1))
    half = len(messages) // 2
    spool = tmp_path / "spool"
    args = ["--to", f"kafka://{kafka.bootstrap}/{kafka_topic}", "--collector-id", kafka_topic,
            "--spool", str(spool)]
    bus.publish(messages[:half])
    p = subprocess.Popen([CLI, "collect", "--from", bus.source, *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    while not topic_items(kafka.bootstrap, kafka_topic):  # its first transaction (and checkpoint) committed
        assert p.poll() is None, p.stderr.read().decode()
        time.sleep(0.05)  # polling the topic, not a delay before an assertion
    p.kill()
    p.wait()
    p.stderr.close()
    bus.publish(messages[half:])
    q = subprocess.run([CLI, "collect", "--from", bus.source, *args, "--stop-after-idle", "2s"],
                       capture_output=True, text=True)
    assert q.returncode == 0, q.stderr
    assert "resumed from the spool's checkpoint" in q.stderr
    events = topic_items(kafka.bootstrap, kafka_topic)
    ref = direct(messages)
    by_id = {(e["origin"], e["seq"]): e for e in events}
    # every access under one identity; a resend (a kill right after a commit) is the same event again
    assert sorted(by_id) == sorted((e["origin"], e["seq"]) for e in ref)
    assert all(by_id[(e["origin"], e["seq"])] == e for e in events)
    assert sorted(by_id.values(), key=lambda e: e["seq"]) == sorted(ref, key=lambda e: e["seq"])


def test_malformed_messages_beyond_the_prefetch_window_do_not_stall_the_rest(bus, tmp_path):
    """Messages that give nothing to flush are acked too: 250 malformed ones ahead of the real ones,
    with the broker handing out 100 at a time, must not leave the rest on the queue."""
    good = shoveled(read_capture(RUN1)[:60])
    bus.publish([b"garbage %d" % i for i in range(250)] + good)
    out = tmp_path / "out.jsonl"
    p = subprocess.Popen([CLI, "collect", "--from", bus.source + "&prefetch=100", "--out", str(out), "--rejects",
                          str(tmp_path / "rejects"), "--stats", "--stop-after-idle", "2s"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stats, _ = finished(p)
    assert stats["bus"]["malformed"] == 250 and stats["bus"]["messages"] == 310
    assert events_of(out) == direct(good)
    assert bus.depth()[0] == 0


# --------------------------------------------------------------------------- STOMP

stomp = pytest.importorskip("stomp")


class StompBus:
    """A topic and a durable subscription of the test's own on the real broker's STOMP port."""

    def __init__(self, rabbitmq, request):
        self.port = int(rabbitmq.env["RABBITMQ_STOMP_PORT"])
        self.topic = unique_name(request, "topic")
        self.subscription = unique_name(request, "sub")
        self.conn = stomp.Connection12([("127.0.0.1", self.port)], vhost="/")
        self.conn.connect("guest", "guest", wait=True)

    @property
    def source(self) -> str:
        return f"stomp://guest:guest@127.0.0.1:{self.port}/topic/{self.topic}?subscription={self.subscription}"

    def publish(self, bodies) -> None:
        for b in bodies:  # the shoveler's way: SEND to /topic/NAME, text/plain, with a receipt
            self.conn.send(f"/topic/{self.topic}", b, content_type="text/plain")

    def close(self) -> None:
        # UNSUBSCRIBE of the durable subscription removes its queue from the broker
        c = stomp.Connection12([("127.0.0.1", self.port)], vhost="/")
        c.connect("guest", "guest", wait=True, headers={"client-id": self.subscription})
        c.subscribe(f"/topic/{self.topic}", id=self.subscription, headers={"durable": "true", "auto-delete": "false"})
        c.unsubscribe(self.subscription, headers={"durable": "true"})
        c.disconnect()
        self.conn.disconnect()


@pytest.fixture
def stomp_bus(rabbitmq, request):
    b = StompBus(rabbitmq, request)
    yield b
    b.close()


def stomp_collect(bus: StompBus, out: Path, *extra: str) -> subprocess.Popen:
    """`collect --from stomp://…`, returned once it is subscribed (its first line)."""
    p = subprocess.Popen([CLI, "collect", "--from", bus.source, "--out", str(out), "--rejects", str(out) + ".rejects",
                          "--stats", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stderr.readline().decode()
    assert "consuming stomp://" in line, line + p.stderr.read().decode()
    p.first_line = line
    return p


def test_the_pelican_capture_over_stomp_gives_what_its_datagrams_give_directly(stomp_bus, tmp_path):
    out = tmp_path / "out.jsonl"
    p = stomp_collect(stomp_bus, out, "--stop-after-idle", "2s")
    messages = pelican_messages()
    bad = [b"not json at all"]
    stomp_bus.publish(messages[:5] + bad + messages[5:])
    stats, _ = finished(p)
    assert events_of(out) == direct(messages)
    assert stats["bus"]["messages"] == len(messages) + 1 and stats["bus"]["malformed"] == 1
    assert stats["bus"]["acked"] == len(messages) + 1


def test_stomp_kill_9_mid_stream_and_a_restart_give_every_access_exactly_once(stomp_bus, tmp_path):
    messages = shoveled(read_capture(RUN1))
    half = len(messages) // 2
    out = tmp_path / "out.jsonl"
    p = stomp_collect(stomp_bus, out)
    stomp_bus.publish(messages[:half])
    until_checkpointed(p, out)
    p.kill()
    p.wait()
    p.stderr.close()
    p.stdout.close()
    stomp_bus.publish(messages[half:])  # the durable subscription keeps them meanwhile
    q = stomp_collect(stomp_bus, out, "--stop-after-idle", "2s")
    assert "resumed from the spool's checkpoint" in q.first_line
    stats, _ = finished(q)
    assert events_of(out) == direct(messages)
