"""XRootD monitoring from a message bus: the messages OSG's xrootd-monitoring-shoveler publishes.

The shoveler receives a server's UDP datagrams and publishes each one as a JSON message
`{"remote": "IP:PORT", "version": "...", "data": "<base64 datagram>"}` to an AMQP exchange
(`shoveled-xrd` by default, empty routing key). `AmqpSource` consumes them from a durable queue bound
to that exchange (`StompSource` from a durable STOMP subscription) and appends each message's
datagram, with the `remote`'s IP as its sender, to the collector's spool (spool.py's writer, as the
UDP receiving process does), fsyncs, and only then acks (cumulatively). Decoding, checkpoints and
restarts are then the spool's, exactly as for `--listen` (run.py): the source has the face of a
spooled receiver.Receiver (`get(timeout)`, `get_nowait()`, `stop()`, `pos`, `resume(pos)`).

A death between the spool's fsync and the ack leaves those messages both in the spool and on the
queue; the broker redelivers them (`redelivered` set). At its start the source reads the digests
(sender, datagram) of the spool's last `MAX_PREFETCH` records, at least every message that can have
been unacked, and a redelivered message whose digest is among them is a counted duplicate, acked,
not spooled again. A malformed message (not JSON, no data, bad base64) is a reject with its reason,
counted and acked with the rest: it can never be decoded.
"""

from __future__ import annotations

import base64
import binascii
import collections
import ipaddress
import threading
import time
from dataclasses import dataclass
from typing import Callable
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlparse, urlunparse

import orjson
import xxhash

from cachescope.errors import UsageError, UserError
from ingest.xrootd_monitoring import spool as spooling

#: what the shoveler publishes to (its `amqp.exchange` default; routing key "")
DEFAULT_EXCHANGE = "shoveled-xrd"
DEFAULT_QUEUE = "cachescope-collect"
#: binding key: every message of a topic exchange, the shoveler's empty key included
DEFAULT_BINDING = "#"
#: unacked messages the broker may hand out at once: the bound on what a consumer holds before a flush
DEFAULT_PREFETCH = 5000
#: the most a broker may hand out unacked (AMQP's prefetch is a u16): how far back a restart looks in
#: the spool for what a killed run spooled and did not ack
MAX_PREFETCH = 65535
_OURS = ("exchange", "queue", "routing_key", "exchange_type", "prefetch")
_MAX_MESSAGE = 1 << 20  # a datagram is at most 64 KiB; its base64 in JSON far less than this


@dataclass(frozen=True)
class BusSettings:
    url: str  # for pika: amqp://USER:PASS@HOST:PORT/VHOST?heartbeat=… (ours removed)
    host: str
    port: int
    exchange: str
    queue: str
    routing_key: str
    exchange_type: str
    prefetch: int

    @property
    def where(self) -> str:
        return f"amqp://{self.host}:{self.port} exchange {self.exchange!r} queue {self.queue!r}"


def _prefetch(value: str | None) -> int:
    try:
        prefetch = int(value if value is not None else DEFAULT_PREFETCH)
        if not 1 <= prefetch <= MAX_PREFETCH:
            raise ValueError
    except ValueError:
        raise UsageError(f"--from: prefetch={value!r}: a count of messages, 1 to {MAX_PREFETCH}") from None
    return prefetch


def parse_from(url: str, *, exchange: str | None = None, queue: str | None = None,
               routing_key: str | None = None) -> BusSettings:
    """amqp://USER:PASS@HOST:PORT/VHOST?exchange=E&queue=Q&routing_key=K -> settings; options win
    over query parameters, which win over the shoveler's defaults."""
    u = urlparse(url)
    try:
        port = u.port
    except ValueError:
        port = None
    if u.scheme not in ("amqp", "amqps") or not u.hostname:
        raise UsageError(f"--from {url!r}: expected amqp://USER:PASS@HOST:PORT/VHOST[?exchange=E&queue=Q&routing_key=K]")
    query = dict(parse_qsl(u.query, keep_blank_values=True))
    ours = {k: query.pop(k) for k in _OURS if k in query}
    exchange_type = ours.get("exchange_type", "topic")
    if exchange_type not in ("topic", "fanout", "direct", "headers"):
        raise UsageError(f"--from: exchange_type={exchange_type!r}: one of topic, fanout, direct, headers")
    prefetch = _prefetch(ours.get("prefetch"))
    rest = urlunparse((u.scheme, u.netloc, u.path, u.params, urlencode(query), ""))
    return BusSettings(url=rest, host=u.hostname, port=port or (5671 if u.scheme == "amqps" else 5672),
                       exchange=exchange if exchange is not None else unquote(ours.get("exchange", DEFAULT_EXCHANGE)),
                       queue=queue if queue is not None else unquote(ours.get("queue", DEFAULT_QUEUE)),
                       routing_key=routing_key if routing_key is not None else ours.get("routing_key", DEFAULT_BINDING),
                       exchange_type=exchange_type, prefetch=prefetch)


class BadMessage(ValueError):
    pass


def sender_ip(remote: object) -> str:
    """"IP:PORT" or "[IPv6]:PORT" (the shoveler's `remote`) -> the IP."""
    if not isinstance(remote, str) or not remote:
        raise BadMessage("no 'remote' (the sender's IP:PORT)")
    host = remote
    if remote.startswith("["):
        host = remote[1:].split("]", 1)[0]
    elif remote.count(":") == 1:
        host = remote.rsplit(":", 1)[0]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        raise BadMessage(f"'remote' {remote[:80]!r} is not IP:PORT") from None


def decode_message(body: bytes) -> tuple[bytes, str]:
    """A shoveler message -> (datagram, sender IP); BadMessage with the reason otherwise."""
    if len(body) > _MAX_MESSAGE:
        raise BadMessage(f"message of {len(body)} bytes (a datagram's message is far less than {_MAX_MESSAGE})")
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadMessage("not JSON") from None
    if not isinstance(doc, dict):
        raise BadMessage("not a JSON object")
    data = doc.get("data")
    if not isinstance(data, str) or not data:
        raise BadMessage("no 'data' (the base64 datagram)")
    ip = sender_ip(doc.get("remote"))
    try:
        datagram = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadMessage("'data' is not base64") from None
    if not datagram:
        raise BadMessage("'data' is empty")
    return datagram, ip


def digest(datagram: bytes, sender: str) -> int:
    """What tells a redelivered message from a new one: its datagram and sender, as spooled."""
    return xxhash.xxh3_64_intdigest(datagram, seed=xxhash.xxh32_intdigest(sender.encode()))


@dataclass(slots=True)
class Delivery:
    tag: int
    body: bytes
    redelivered: bool


class BusSource:
    """What every bus source shares: deliveries in order into the spool (malformed ones rejected,
    redeliveries of what is spooled already skipped), fsynced, then acked; `get` reads the spool.
    A subclass connects, fills `_inbox` in `_pump(seconds)` and acks cumulatively in `_ack(tag)`."""

    def __init__(self, settings, spool: Path, *,
                 on_malformed: Callable[[str, bytes, int], None] | None = None):
        self.settings = settings
        self.on_malformed = on_malformed or (lambda reason, body, n: None)
        self.messages = 0  # consumed
        self.malformed = 0
        self.duplicates = 0  # redeliveries of what the spool holds
        self.acked = 0
        self._inbox: collections.deque[Delivery] = collections.deque()
        self._stopped = False
        self.spool = spool
        try:
            self.end = spooling.recover(spool)
            first = spooling.segments(spool)
            self._cursor = spooling.SpoolCursor(spool, first[0][0] if first else self.end)
            #: digests of the records a killed run may have spooled without acking them
            self._held = collections.Counter(spooling.tail(spool, MAX_PREFETCH, digest))
            self._writer = spooling.SpoolWriter(spool, self.end)
        except OSError as exc:
            raise UserError(f"cannot use the spool {spool}: {exc.strerror or exc}") from None

    @property
    def pos(self) -> int:
        """The spool position after the datagram `get` gave last."""
        return self._cursor.pos

    @property
    def arrival(self) -> int:
        """The arrival time (UTC µs) of the datagram `get` gave last: it moves the reorder window."""
        return self._cursor.arrival

    def resume(self, pos: int) -> None:
        """Decode from spool position `pos` on (what before it was decoded and stored)."""
        self._cursor.pos = pos

    def skipped_bytes(self) -> int:
        return self._cursor.skipped_bytes()

    def _pump(self, seconds: float) -> None:
        raise NotImplementedError

    def _ack(self, tag: int) -> None:
        raise NotImplementedError

    def start(self) -> "BusSource":
        return self

    def spool_delivered(self) -> tuple[int, int]:
        """The deliveries received so far -> the spool, fsynced: (the last one's tag, how many),
        (0, 0) when there were none. Nothing is acked yet."""
        batch = bytearray()
        last = n = 0
        arrival = time.time_ns() // 1000
        while self._inbox:
            d = self._inbox.popleft()
            last, n = d.tag, n + 1
            self.messages += 1
            try:
                datagram, ip = decode_message(d.body)
            except BadMessage as exc:
                self.malformed += 1
                self.on_malformed(str(exc), d.body, self.messages)
                continue
            if d.redelivered and self._held:
                key = digest(datagram, ip)
                if self._held[key] > 0:
                    self._held[key] -= 1
                    self.duplicates += 1
                    continue
            batch += spooling.encode(arrival, ip.encode(), datagram)
        if batch:
            try:
                self.end = self._writer.append(bytes(batch))
            except OSError as exc:  # nothing acked: the broker keeps them all
                raise UserError(f"cannot write the spool {self.spool}: {exc.strerror or exc}") from None
        return last, n

    def _take(self) -> None:
        tag, n = self.spool_delivered()
        if tag:
            self._ack(tag)  # on disk: the broker may forget them
            self.acked += n

    def get(self, timeout: float | None) -> tuple[bytes, str] | None:
        item = self._cursor.next(self.end)
        if item is not None or self._stopped:
            return item
        self._pump(0.1 if timeout is None else timeout)
        self._take()
        return self._cursor.next(self.end)

    def get_nowait(self) -> tuple[bytes, str] | None:
        item = self._cursor.next(self.end)
        if item is None and not self._stopped:
            self._pump(0)
            self._take()
            item = self._cursor.next(self.end)
        return item

    def close_spool(self) -> None:
        self._cursor.close()
        self._writer.close()


class AmqpSource(BusSource):
    """The collector's source for `--from amqp://`: connects and declares at once (an unreachable
    broker or a refused login fails here); `get(timeout)` gives (datagram, sender IP) or None.
    One thread: pika's BlockingConnection is driven from `get` (heartbeats included)."""

    def __init__(self, settings: BusSettings, spool: Path, **kw):
        import pika
        import pika.exceptions

        super().__init__(settings, spool, **kw)
        s = settings
        try:
            params = pika.URLParameters(s.url)
        except Exception as exc:  # noqa: BLE001 - pika's own URL checks
            raise UsageError(f"--from {s.where}: {exc}") from None
        try:
            self.conn = pika.BlockingConnection(params)
        except pika.exceptions.ProbableAuthenticationError:
            raise UserError(f"--from {s.where}: login refused (check USER:PASS in the URL)") from None
        except pika.exceptions.ProbableAccessDeniedError:
            raise UserError(f"--from {s.where}: access to the virtual host refused (check /VHOST and the "
                             f"user's permissions)") from None
        except (pika.exceptions.AMQPError, OSError) as exc:
            raise UserError(f"--from {s.where}: cannot connect ({type(exc).__name__}: {exc or 'no answer'}); "
                             f"is the broker running there?") from None
        try:
            ch = self.conn.channel()
            try:
                ch.exchange_declare(s.exchange, passive=True)
            except pika.exceptions.ChannelClosedByBroker:
                # absent: declared as the shoveler's bus has it (durable), so it exists for the publisher
                ch = self.conn.channel()
                ch.exchange_declare(s.exchange, exchange_type=s.exchange_type, durable=True)
            ch.queue_declare(s.queue, durable=True)
            ch.queue_bind(s.queue, s.exchange, routing_key=s.routing_key)
            ch.basic_qos(prefetch_count=s.prefetch)
            self._consumer_tag = ch.basic_consume(s.queue, self._on_message, auto_ack=False)
        except pika.exceptions.AMQPError as exc:
            self.conn.close()
            raise UserError(f"--from {s.where}: cannot consume: {exc}") from None
        self.ch = ch

    def _on_message(self, ch, method, properties, body: bytes) -> None:
        self._inbox.append(Delivery(method.delivery_tag, body, bool(method.redelivered)))

    def _pump(self, seconds: float) -> None:
        import pika.exceptions

        try:
            self.conn.process_data_events(time_limit=seconds)
        except (pika.exceptions.AMQPError, OSError) as exc:
            raise BusLost(f"{self.settings.where}: connection lost ({type(exc).__name__}: {exc}); "
                          f"unacked messages stay on the queue for the next run") from None

    def _ack(self, tag: int) -> None:
        import pika.exceptions

        try:
            self.ch.basic_ack(delivery_tag=tag, multiple=True)
        except (pika.exceptions.AMQPError, OSError) as exc:
            raise BusLost(f"{self.settings.where}: cannot ack ({type(exc).__name__}: {exc}); the broker "
                          f"redelivers those messages to the next run, which skips what its spool "
                          f"holds") from None

    def stop(self) -> None:
        """Stop consuming: messages prefetched but not handed out go back to the queue (their
        order kept) when the connection closes; what was handed out is acked by the caller first."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.ch.basic_cancel(self._consumer_tag)  # no more deliveries
        except Exception:  # noqa: BLE001 - a lost connection: the broker requeues everything unacked
            pass

    def close(self) -> None:
        self._inbox.clear()
        try:
            if self.conn.is_open:
                self.conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass
        self.close_spool()


class BusLost(UserError):
    """The broker went away mid-run (it keeps every unacked message): exit 1."""


# --------------------------------------------------------------------------- STOMP

#: the durable subscription's name (the broker keeps its messages while no collector runs)
DEFAULT_SUBSCRIPTION = "cachescope-collect"


@dataclass(frozen=True)
class StompSettings:
    host: str
    port: int
    user: str
    password: str
    destination: str
    subscription: str
    prefetch: int
    vhost: str = "/"

    @property
    def where(self) -> str:
        return f"stomp://{self.host}:{self.port} destination {self.destination!r}"

    @property
    def ident(self) -> str:
        return f"stomp:{self.host}:{self.port}{self.destination}/{self.subscription}"


def parse_stomp(url: str) -> StompSettings:
    """stomp://USER:PASS@HOST:PORT/topic/NAME[?subscription=ID&prefetch=N]; a bare /NAME is the
    shoveler's topic (it publishes to /topic/NAME)."""
    u = urlparse(url)
    try:
        port = u.port
    except ValueError:
        port = None
    path = unquote(u.path)
    if u.scheme != "stomp" or not u.hostname or path in ("", "/"):
        raise UsageError(f"--from {url!r}: expected stomp://USER:PASS@HOST:PORT/topic/NAME (the shoveler's "
                         f"stomp.topic)")
    query = dict(parse_qsl(u.query, keep_blank_values=True))
    unknown = set(query) - {"subscription", "prefetch", "vhost"}
    if unknown:
        raise UsageError(f"--from {url!r}: unknown parameter {sorted(unknown)[0]!r} (subscription, prefetch, vhost)")
    if not path.startswith(("/topic/", "/queue/", "/amq/queue/", "/exchange/")):
        path = "/topic/" + path.lstrip("/")
    prefetch = _prefetch(query.get("prefetch"))
    return StompSettings(host=u.hostname, port=port or 61613, user=unquote(u.username or ""),
                         password=unquote(u.password or ""), destination=path,
                         subscription=query.get("subscription", DEFAULT_SUBSCRIPTION), prefetch=prefetch,
                         vhost=query.get("vhost", "/"))


class StompSource(BusSource):
    """The collector's source for `--from stomp://` (stomp.py): a durable subscription in `client`
    ack mode (an ack covers every earlier message), RabbitMQ's and ActiveMQ's durable headers both
    given. stomp.py receives in a thread of its own; its messages wait in the inbox for `get`."""

    def __init__(self, settings: StompSettings, spool: Path, **kw):
        import stomp
        import stomp.exception

        super().__init__(settings, spool, **kw)
        self._arrived = threading.Event()
        self._lost: str | None = None
        self._ack_ids: dict[int, str] = {}
        self._tag = 0
        s = settings
        # the CONNECT frame's host header is RabbitMQ's virtual host (`?vhost=`, default /)
        self.conn = stomp.Connection12([(s.host, s.port)], heartbeats=(10_000, 10_000), auto_decode=False,
                                       reconnect_attempts_max=1, vhost=s.vhost)
        self.conn.set_listener("collect", _StompListener(self))
        try:
            self.conn.connect(s.user, s.password, wait=True, headers={"client-id": s.subscription})
        except stomp.exception.ConnectFailedException:
            if self._lost is not None:  # it answered with an ERROR frame
                raise UserError(f"--from {s.where}: the broker refused the connection ({self._lost}; check "
                                f"USER:PASS and ?vhost= in the URL)") from None
            raise UserError(f"--from {s.where}: cannot connect; is the broker running there?") from None
        except Exception as exc:  # noqa: BLE001 - a refused login ends the connection with an ERROR frame
            raise UserError(f"--from {s.where}: cannot connect ({type(exc).__name__}: {exc})") from None
        if not self.conn.is_connected():
            raise UserError(f"--from {s.where}: the broker refused the connection ({self._lost or 'no reason'}; "
                            f"check USER:PASS in the URL)")
        self._subscribed = threading.Event()
        self.conn.subscribe(s.destination, id=s.subscription, ack="client", headers={
            "durable": "true", "auto-delete": "false", "prefetch-count": str(s.prefetch),
            "activemq.subscriptionName": s.subscription, "activemq.prefetchSize": str(s.prefetch),
            "receipt": "subscribed"})
        # the broker's receipt: from here on the subscription holds what is published
        while not self._subscribed.wait(1.0):
            if self._lost is not None or not self.conn.is_connected():
                raise UserError(f"--from {s.where}: the broker refused the subscription ({self._lost or 'closed'})")

    def _message(self, frame) -> None:
        self._tag += 1
        self._ack_ids[self._tag] = frame.headers.get("ack") or frame.headers.get("message-id", "")
        body = frame.body if isinstance(frame.body, bytes) else frame.body.encode()
        self._inbox.append(Delivery(self._tag, body, frame.headers.get("redelivered") == "true"))
        self._arrived.set()

    def _pump(self, seconds: float) -> None:
        if self._lost is not None:
            raise BusLost(f"{self.settings.where}: connection lost ({self._lost}); unacked messages stay "
                          f"with the broker for the next run")
        if not self._inbox:
            self._arrived.clear()
            if not self._inbox:
                self._arrived.wait(seconds)

    def _ack(self, tag: int) -> None:
        ack_id = self._ack_ids[tag]
        try:
            self.conn.ack(ack_id)
        except Exception as exc:  # noqa: BLE001 - the connection went away
            raise BusLost(f"{self.settings.where}: cannot ack ({type(exc).__name__}: {exc}); the broker "
                          f"redelivers those messages to the next run, which skips what its spool "
                          f"holds") from None
        for t in [t for t in self._ack_ids if t <= tag]:
            del self._ack_ids[t]

    def stop(self) -> None:
        """No more handing out beyond what has arrived; the durable subscription stays (a
        disconnect, never an UNSUBSCRIBE, which would delete it)."""
        self._stopped = True

    def close(self) -> None:
        self._inbox.clear()
        try:
            if self.conn.is_connected():
                self.conn.disconnect()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass
        self.close_spool()


class _StompListener:
    def __init__(self, source: StompSource):
        self.source = source

    def on_message(self, frame) -> None:
        self.source._message(frame)

    def on_receipt(self, frame) -> None:
        if frame.headers.get("receipt-id") == "subscribed":
            self.source._subscribed.set()

    def on_error(self, frame) -> None:
        body = frame.body.decode(errors="replace") if isinstance(frame.body, bytes) else str(frame.body or "")
        self.source._lost = " ".join(filter(None, [frame.headers.get("message", "an ERROR frame"),
                                                   body.strip()[:200]])).replace("\n", " ")

    def on_disconnected(self) -> None:
        if self.source._lost is None:
            self.source._lost = "disconnected"

    def __getattr__(self, name):  # stomp.py calls every on_* hook
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)
