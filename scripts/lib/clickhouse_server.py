"""A real ClickHouse server from libchdb.so: clickhouse-local with its TCP and HTTP listeners.

libchdb.so (npm @chdb/lib-linux-x64-gnu) exports `query_stable_v2(argc, argv)`, which runs
clickhouse-local with ordinary command-line arguments. `SYSTEM START LISTEN` opens the native and
HTTP listeners, and they serve for as long as the query runs, so the query sleeps "forever"
(one row per second over an unbounded numbers()). Started and stopped by scripts/services:
stop is `KILL QUERY` on QUERY_ID (the call returns and ClickHouse shuts down cleanly), then
SIGTERM/SIGKILL by PID if that did not work.

The native port is served through a small relay in this process. libchdb's listener dies
(std::terminate on an uncaught NetException) when a client's connection is reset in the middle
of a query, which is exactly what a SIGKILLed client does: a test that kills a job mid-insert
took the server down with it. The relay turns a client's reset into an orderly close towards
ClickHouse, which handles that like any interrupted insert. A production ClickHouse server does
not need this.

Standard library only: this runs before (and without) the project's virtual environment.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import sys
import threading

QUERY_ID = "cachescope-clickhouse-server"


class _Result(ctypes.Structure):
    # struct local_result_v2 from chdb.h
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("_vec", ctypes.c_void_p),
        ("elapsed", ctypes.c_double),
        ("rows_read", ctypes.c_uint64),
        ("bytes_read", ctypes.c_uint64),
        ("error_message", ctypes.c_char_p),
    ]


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy src → dst until src ends or fails, then half-close dst (FIN, never a reset)."""
    buf = bytearray(1 << 18)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if not n:
                break
            dst.sendall(view[:n])
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _relay(client: socket.socket, upstream_port: int, host: str) -> None:
    try:
        server = socket.create_connection((host, upstream_port))
    except OSError:
        client.close()
        return
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pump, args=(server, client), daemon=True)
    back.start()
    _pump(client, server)  # the client went away: ClickHouse now sees end-of-stream
    back.join()  # ClickHouse's answer drained, so closing sends no reset to it
    client.close()
    server.close()


def serve_relay(listener: socket.socket, upstream_port: int, host: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_relay, args=(client, upstream_port, host), daemon=True).start()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="path of libchdb.so")
    ap.add_argument("--path", required=True, help="data directory")
    ap.add_argument("--tcp-port", type=int, required=True)
    ap.add_argument("--http-port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    a = ap.parse_args()

    # the public native port is the relay's; ClickHouse listens on a private one behind it
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((a.host, a.tcp_port))
    listener.listen(128)
    with socket.socket() as probe:
        probe.bind((a.host, 0))
        native_port = probe.getsockname()[1]
    threading.Thread(target=serve_relay, args=(listener, native_port, a.host), daemon=True).start()

    os.makedirs(a.path, exist_ok=True)
    os.chdir(a.path)  # clickhouse-local may write next to its working directory
    lib = ctypes.CDLL(a.lib)
    lib.query_stable_v2.restype = ctypes.POINTER(_Result)
    lib.query_stable_v2.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    # sleepEachRow is capped per block (function_sleep_max_microseconds_per_block, 3 s), so
    # one-row blocks of 1 s each; numbers(10^15) outlasts any machine.
    serve = (
        "SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; "
        "SELECT sleepEachRow(1) FROM numbers(1000000000000000) FORMAT Null "
        "SETTINGS max_block_size = 1, max_execution_time = 0"
    )
    args = [
        "clickhouse",
        "--multiquery",
        f"--path={a.path}",
        f"--listen_host={a.host}",
        f"--tcp_port={native_port}",
        f"--http_port={a.http_port}",
        f"--query_id={QUERY_ID}",
        "--logger.console=1",
        "--logger.level=error",
        f"--query={serve}",
    ]
    argv = (ctypes.c_char_p * len(args))(*[s.encode() for s in args])
    print(f"clickhouse_server: pid {os.getpid()} tcp {a.host}:{a.tcp_port} http {a.host}:{a.http_port} "
          f"path {a.path}", file=sys.stderr, flush=True)
    res = lib.query_stable_v2(len(args), argv)
    # The serving query never ends by itself: returning means it was killed (stop) or failed.
    msg = res.contents.error_message if res else None
    if msg:
        print(f"clickhouse_server: error: {msg.decode(errors='replace')}", file=sys.stderr, flush=True)
        return 1
    print("clickhouse_server: serving query ended", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
