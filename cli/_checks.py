"""Checks the commands run before they start work: servers answer, URLs are well formed, input
files exist. Each raises UserError / UsageError with one line naming the value and what to do."""

from __future__ import annotations

import re
import socket
import struct
from pathlib import Path
from urllib.parse import urlparse

from cachescope.errors import UsageError, UserError

#: seconds to wait for a TCP connection, and for a server's first answer
CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 10.0


def host_port(text: str, option: str, default_port: int) -> tuple[str, int]:
    host, sep, port = text.rpartition(":") if text.count(":") == 1 or text.startswith("[") else (text, "", "")
    if not sep:
        host, port = text, str(default_port)
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{option} {text!r}: expected HOST:PORT with a port from 1 to 65535")
    return host, int(port)


def tcp_reachable(host: str, port: int, what: str, hint: str) -> None:
    """Raise UserError (exit 1) when nothing accepts a connection at host:port."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            return
    except socket.timeout:
        problem = f"no answer within {CONNECT_TIMEOUT:g} s"
    except OSError as exc:
        problem = exc.strerror or str(exc)
    raise UserError(f"{what} at {host}:{port} is unreachable ({problem}); {hint}")


def kafka_url(url: str, option: str) -> tuple[str, str]:
    """kafka://HOST:PORT[,HOST:PORT]/TOPIC → (bootstrap, topic), or UsageError naming the option."""
    u = urlparse(url)
    topic = u.path.lstrip("/")
    if u.scheme != "kafka" or not u.netloc or not topic:
        raise UsageError(f"{option} {url!r}: expected kafka://HOST:PORT/TOPIC")
    for server in u.netloc.split(","):
        host_port(server, option, 9092)
    return u.netloc, topic


#: ApiVersions v0 request (api key 18), correlation id 1, client id "cachescope": every broker answers it
_KAFKA_API_VERSIONS = (struct.pack(">hhih", 18, 0, 1, 10) + b"cachescope")
_KAFKA_API_VERSIONS = struct.pack(">i", len(_KAFKA_API_VERSIONS)) + _KAFKA_API_VERSIONS


def _kafka_answers(host: str, port: int) -> str | None:
    """None when a Kafka broker answers at host:port, else what went wrong."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT) as s:
            s.settimeout(ANSWER_TIMEOUT)
            s.sendall(_KAFKA_API_VERSIONS)
            head = s.recv(8)
    except socket.timeout:
        return f"accepted the connection but did not answer within {ANSWER_TIMEOUT:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    if len(head) < 8 or struct.unpack(">i", head[4:8])[0] != 1:  # size, then our correlation id
        return "answered, but not as a Kafka broker"
    return None


def kafka_reachable(bootstrap: str, option: str) -> None:
    """At least one bootstrap server answers as a Kafka broker (kafka-python would retry for 30 s
    and then raise a bare timeout)."""
    errors = []
    for server in bootstrap.split(","):
        host, port = host_port(server, option, 9092)
        problem = _kafka_answers(host, port)
        if problem is None:
            return
        errors.append(f"Kafka broker at {host}:{port} is unreachable ({problem})")
    raise UserError("; ".join(errors) + f"; start the broker or fix {option}")


def clickhouse_url(url: str) -> tuple[str, int]:
    """(host, native port) of clickhouse://[user[:password]@]host:port[/database]."""
    u = urlparse(url)
    if u.scheme not in ("clickhouse", "clickhouses", "tcp") or not u.hostname:
        raise UsageError(f"--clickhouse {url!r}: expected clickhouse://HOST:PORT[/DATABASE] (the native port, 9000)")
    try:
        port = u.port or 9000
    except ValueError:
        raise UsageError(f"--clickhouse {url!r}: the port must be a number from 1 to 65535") from None
    return u.hostname, port


def clickhouse_answers(url: str) -> None:
    """The server accepts a connection and answers a query in time (a port that accepts and never
    answers would hang clickhouse-driver for minutes)."""
    host, port = clickhouse_url(url)
    tcp_reachable(host, port, "ClickHouse server", "start it or fix --clickhouse")
    from clickhouse_driver import Client
    from clickhouse_driver.errors import Error

    import logging

    log = logging.getLogger("clickhouse_driver")
    log.propagate = False  # its connection warnings would print a second, raw line
    log.addHandler(logging.NullHandler())
    u = urlparse(url)
    client = Client(host=host, port=port, user=u.username or "default", password=u.password or "",
                    secure=u.scheme == "clickhouses", connect_timeout=CONNECT_TIMEOUT,
                    send_receive_timeout=ANSWER_TIMEOUT, sync_request_timeout=ANSWER_TIMEOUT)
    try:
        client.execute("SELECT 1")
    except (Error, OSError, EOFError) as exc:
        message = " ".join((getattr(exc, "message", None) or str(exc) or type(exc).__name__).split())
        if "timed out" in message.lower() or "Timeout" in type(exc).__name__ or isinstance(exc, socket.timeout):
            message = f"accepted the connection but did not answer within {ANSWER_TIMEOUT:g} s"
        raise UserError(f"ClickHouse server at {host}:{port}: {message[:300]} (is it ClickHouse's native "
                        "TCP port, usually 9000? the HTTP port 8123 does not speak it)") from None
    finally:
        client.disconnect()


def input_file(path: str | Path, option: str = "") -> None:
    p = Path(path)
    label = f"{option} {path}" if option else str(path)
    if p.is_dir():
        raise UsageError(f"{label}: is a directory, not a log file")
    if not p.exists():
        raise UsageError(f"{label}: no such file")


def plain_text_log(path: str | Path, option: str) -> None:
    """A followed log must be plain text: a gzip/zstd file would ship as binary garbage."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head[:2] == b"\x1f\x8b" or head == b"\x28\xb5\x2f\xfd":
        raise UsageError(f"{option} {path}: is compressed; ship follows a plain-text log as it grows "
                         "(decompress it, or load old compressed logs with `cachescope replay`)")


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def database_name(name: str) -> None:
    """--database goes into SQL as an identifier: letters, digits and _ only."""
    if not _IDENTIFIER.match(name):
        raise UsageError(f"--database {name!r}: use letters, digits and _ (not starting with a digit), e.g. cachescope")
