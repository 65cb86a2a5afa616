"""The receiving process: nothing but recv on the collector's UDP socket, into a pipe.

Started by `receiver.Receiver` (`python -m ingest.xrootd_monitoring.recv_process SOCK_FD PIPE_FD
[SPOOL_DIR END]`, both descriptors inherited). A process of its own, because a receiving *thread* shares the interpreter lock
with decoding: while the decoder runs, a thread gets it back once per switch interval, one
datagram each time, and a burst overflows the kernel's buffer (measured: 37 % of a 20k/s burst
lost; docs/notes/collect.md). Here every readable moment drains the socket, datagrams are framed
({u16 address length; address; u32 length; payload}) into memory and written to the pipe when it
can take them, so a slow reader never stops the receiving. With a spool (spool.py) the datagrams go to the spool
instead, each drained batch fsynced, and the pipe carries only the spool's new end (u64) after
each batch: what this process received is on disk before anyone decodes it, and when the
collector is killed this process still spools what the kernel holds before it exits (it notices
within 0.2 s). SIGTERM: drain the socket, write everything, close the pipe, exit. SIGINT is ignored (a terminal's Ctrl-C reaches the parent,
which stops this process by SIGTERM once it is ready to read the rest). Imports only the
standard library: it starts in a few milliseconds.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import socket
import struct
import sys
from collections.abc import Iterator

_ADDR = struct.Struct("<H")
_LEN = struct.Struct("<I")
_POS = struct.Struct("<Q")
_RECV_BYTES = 65536
_PIPE_BYTES = 1 << 20
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def waiting(recv) -> Iterator[tuple[bytes, tuple]]:
    """The datagrams the socket holds now, 100 000 at most (then the pipe gets its turn)."""
    for _ in range(100_000):
        try:
            yield recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return


def main(sock_fd: int, pipe_fd: int, spool_dir: str | None = None, spool_end: int = 0) -> int:
    stop = False

    def on_term(signum, frame) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:  # it does little (recv, copy) but must do it at once: ahead of the decoder when allowed
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0) - 10, -20))
    except OSError:
        pass  # needs CAP_SYS_NICE: then the socket buffer alone absorbs the decoder's share
    parent = os.getppid()
    sock = socket.socket(fileno=sock_fd)
    sock.setblocking(False)
    try:
        fcntl.fcntl(pipe_fd, F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:
        pass  # the default 64 KiB: more writes, same result
    os.set_blocking(pipe_fd, False)
    recv = sock.recvfrom
    addr_frames: dict[str, bytes] = {}
    if spool_dir is not None:
        import time
        from pathlib import Path

        from ingest.xrootd_monitoring.spool import SpoolWriter, encode

        spool = SpoolWriter(Path(spool_dir), spool_end)
        out = bytearray(_POS.pack(spool.end))  # its first end: "receiving" (Receiver.start waits for it)
        addr_bytes: dict[str, bytes] = {}

        def drain() -> None:
            batch = bytearray()
            for data, addr in waiting(recv):
                raw = addr_bytes.get(addr[0])
                if raw is None:
                    raw = addr_bytes[addr[0]] = addr[0].encode()
                batch += encode(time.time_ns() // 1000, raw, data)
            if batch:
                end = spool.append(bytes(batch))
                out[:] = _POS.pack(end)  # only the newest end matters
    else:
        out = bytearray(_ADDR.pack(0) + _LEN.pack(0))  # an empty frame: "receiving" (Receiver.start waits for it)

        def drain() -> None:
            for data, addr in waiting(recv):
                frame = addr_frames.get(addr[0])
                if frame is None:
                    raw = addr[0].encode()
                    frame = addr_frames[addr[0]] = _ADDR.pack(len(raw)) + raw
                out.extend(frame)
                out.extend(_LEN.pack(len(data)))
                out.extend(data)

    def write() -> bool:
        """False when the reader is gone."""
        while out:
            try:
                n = os.write(pipe_fd, out[:_PIPE_BYTES])
            except BlockingIOError:
                return True
            except InterruptedError:
                continue
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    return False
                raise
            del out[:n]
        return True

    while not stop:
        try:
            readable, writable, _ = select.select([sock], [pipe_fd] if out else [], [], 0.2)
        except InterruptedError:
            continue
        if readable:
            drain()
        if out and not write():
            if spool_dir is not None:
                drain()
            return 0
        if os.getppid() != parent:  # the collector died: nobody reads (a spool keeps what the kernel held)
            if spool_dir is not None:
                drain()
            return 0
    drain()
    os.set_blocking(pipe_fd, True)
    try:
        while out:
            n = os.write(pipe_fd, out[:_PIPE_BYTES])
            del out[:n]
    except BrokenPipeError:
        pass
    os.close(pipe_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), *(sys.argv[3:4]), *(int(a) for a in sys.argv[4:5])))
