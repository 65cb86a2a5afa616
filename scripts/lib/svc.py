"""Small helpers for scripts/services: free ports, readiness probes, graceful ClickHouse stop.

Standard library only (the services start before, and without, the project's virtual
environment); the native ClickHouse probe uses clickhouse-driver when it is importable.

    svc.py free-port [PREFERRED]          print a free 127.0.0.1 port (PREFERRED if still free)
    svc.py kafka-ready HOST:PORT          exit 0 when a Metadata request lists a broker
    svc.py clickhouse-ready HTTP TCP      exit 0 when SELECT 1 answers over HTTP and native
    svc.py clickhouse-kill HTTP QUERY_ID  KILL QUERY the serving query (a clean shutdown)
    svc.py flink-ready HOST:PORT [N]      exit 0 when Flink's REST API lists at least N TaskManagers
"""

from __future__ import annotations

import socket
import struct
import sys
import urllib.parse
import urllib.request

HOST = "127.0.0.1"


def free_port(preferred: int | None = None) -> int:
    if preferred:
        try:
            with socket.socket() as s:
                # as the servers bind: a port in TIME_WAIT after a restart is still usable
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((HOST, preferred))
                return preferred
        except OSError:
            pass
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- Kafka

def _kstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def kafka_brokers(bootstrap: str, timeout: float = 3.0) -> list[tuple[int, str, int]]:
    """A Metadata v4 request (the oldest Kafka 4 accepts) for no topics: the broker list."""
    host, port = bootstrap.rsplit(":", 1)
    body = struct.pack(">hhi", 3, 4, 7) + _kstr("cachescope-probe") + struct.pack(">ib", 0, 0)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        head = _recv(s, 4)
        data = _recv(s, struct.unpack(">i", head)[0])
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take(">h")
        if n < 0:
            return None
        v = data[pos:pos + n].decode()
        pos += n
        return v

    if take(">i") != 7:
        raise RuntimeError("Kafka answered another request")
    take(">i")  # throttle_time_ms
    brokers = []
    for _ in range(take(">i")):
        node = take(">i")
        h = string()
        p = take(">i")
        string()  # rack
        brokers.append((node, h, p))
    return brokers


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


# --------------------------------------------------------------------------- ClickHouse

def clickhouse_http(port: int, sql: str, timeout: float = 5.0) -> str:
    req = urllib.request.Request(f"http://{HOST}:{port}/", data=sql.encode())
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def clickhouse_native_select1(port: int) -> None:
    try:
        from clickhouse_driver import Client  # the venv's, when run from it
    except ImportError:
        _native_hello(port)
        return
    c = Client(host=HOST, port=port, connect_timeout=3, send_receive_timeout=10)
    try:
        if c.execute("SELECT 1") != [(1,)]:
            raise RuntimeError("native SELECT 1 gave another answer")
    finally:
        c.disconnect()


def _native_hello(port: int) -> None:
    """Without clickhouse-driver: the native protocol's Hello exchange (server answers Hello=0)."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def s(x: str) -> bytes:
        return varint(len(x)) + x.encode()

    hello = varint(0) + s("cachescope-probe") + varint(1) + varint(0) + varint(54460) + s("default") + s("default") + s("")
    with socket.create_connection((HOST, port), timeout=3) as sock:
        sock.sendall(hello)
        first = sock.recv(1)
    if first != b"\x00":
        raise RuntimeError(f"native protocol answered packet {first!r}, not Hello")


# --------------------------------------------------------------------------- Flink

def amqp_ready(port: int) -> bool:
    """The broker answers the AMQP 0-9-1 protocol header with Connection.Start (class 10, method 10)."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        head = _recv(s, 11)
        return head[0] == 1 and struct.unpack(">HH", head[7:11]) == (10, 10)


def flink_taskmanagers(rest: str) -> int:
    import json

    with urllib.request.urlopen(f"http://{rest}/taskmanagers", timeout=5) as r:
        return len(json.load(r)["taskmanagers"])


def main(argv: list[str]) -> int:
    cmd, args = argv[0], argv[1:]
    try:
        if cmd == "free-port":
            print(free_port(int(args[0]) if args and args[0] else None))
        elif cmd == "kafka-ready":
            if not kafka_brokers(args[0]):
                return 1
        elif cmd == "clickhouse-ready":
            if clickhouse_http(int(args[0]), "SELECT 1").strip() != "1":
                return 1
            clickhouse_native_select1(int(args[1]))
        elif cmd == "flink-ready":
            if flink_taskmanagers(args[0]) < (int(args[1]) if len(args) > 1 and args[1] != "-v" else 0):
                return 1
        elif cmd == "tcp-ready":
            socket.create_connection(("127.0.0.1", int(args[0])), timeout=2).close()
        elif cmd == "amqp-ready":
            if not amqp_ready(int(args[0])):
                return 1
            if len(args) > 1:  # the STOMP listener (a plugin: it starts after AMQP's)
                socket.create_connection(("127.0.0.1", int(args[1])), timeout=2).close()
        elif cmd == "clickhouse-kill":
            clickhouse_http(int(args[0]), f"KILL QUERY WHERE query_id = '{args[1]}' SYNC", timeout=30)
        else:
            print(f"svc.py: unknown command {cmd}", file=sys.stderr)
            return 2
    except (OSError, RuntimeError, ConnectionError, struct.error) as e:
        if "-v" in args:
            print(f"svc.py {cmd}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # clickhouse_driver errors while the server comes up
        if "-v" in args:
            print(f"svc.py {cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
