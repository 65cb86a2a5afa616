"""The UDP socket, its receiving process (recv_process: nothing but recv, into a pipe) and the
thread that reads the pipe into a queue: a burst is held in memory (and the kernel's buffer, made
large) while decoding runs elsewhere. With a spool (spool.py) the receiving process writes the
datagrams to disk and the pipe only says how far the spool reaches: `get` reads them from the
spool, from the position the caller resumes at (`pos` is the spool position after the datagram
`get` gave last)."""

from __future__ import annotations

import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from cachescope.errors import UsageError

#: the receive buffer asked for (the kernel caps SO_RCVBUF at net.core.rmem_max unless the
#: process may force it): 20k datagrams/s of ~1 KiB for a second and more
RCVBUF_BYTES = 64 << 20
_ADDR = struct.Struct("<H")  # recv_process's frames: {u16 address length; address; u32 length; payload}
_LEN = struct.Struct("<I")
_POS = struct.Struct("<Q")
_ROOT = str(Path(__file__).resolve().parents[2])  # where `ingest` is, for the child's `-m`


def parse_listen(url: str) -> tuple[str, int]:
    """udp://HOST:PORT -> (host, port)."""
    u = urlparse(url)
    try:
        port = u.port
    except ValueError:
        port = None
    if u.scheme != "udp" or not u.hostname or port is None or u.path not in ("", "/"):
        raise UsageError(f"--listen {url!r}: expected udp://HOST:PORT (e.g. udp://0.0.0.0:9930)")
    return u.hostname, port


def _chunks(fd: int, size: int) -> Iterator[bytes]:
    """What the child writes to the pipe `fd`, `size` bytes at most a read, until it closes it."""
    while True:
        try:
            chunk = os.read(fd, size)
        except InterruptedError:
            continue
        if not chunk:
            return
        yield chunk


class Receiver:
    """Binds at once (a port in use fails here); `start()` starts the receiving process
    (recv_process) and the thread that reads its pipe into the queue; `get(timeout)` gives
    (payload, sender address) or None; `stop()` has the process hand over everything the kernel
    still holds for the socket, reads it to the end, and closes the socket."""

    def __init__(self, host: str, port: int, spool: Path | None = None, rcvbuf: int = RCVBUF_BYTES):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        for opt in (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF):
            if opt is None:
                continue
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, opt, rcvbuf)
                break
            except OSError:  # SO_RCVBUFFORCE needs CAP_NET_ADMIN
                continue
        self.rcvbuf = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        try:
            self.sock.bind((host, port))
        except OSError as exc:
            self.sock.close()
            raise UsageError(f"udp://{host}:{port}: cannot listen there: {exc.strerror or exc}") from None
        self.address = self.sock.getsockname()[:2]
        self._inode = os.fstat(self.sock.fileno()).st_ino
        self._drops = 0
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.received = 0
        self._proc: subprocess.Popen | None = None
        self._stopped = False
        self._closed = False
        self._ready = threading.Event()
        self.spool = spool
        self._cursor = None
        if spool is not None:
            from ingest.xrootd_monitoring import spool as spooling

            self.spool_end = self.end = spooling.recover(spool)
            first = spooling.segments(spool)
            # by default all that is retained
            self._cursor = spooling.SpoolCursor(spool, first[0][0] if first else self.end)
            self._cond = threading.Condition()
            self._eof = False
        self._thread = threading.Thread(target=self._read if spool is None else self._read_ends,
                                        name="collect-recv", daemon=True)

    @property
    def pos(self) -> int:
        """With a spool: the position after the datagram `get` gave last."""
        return self._cursor.pos if self._cursor is not None else 0

    @property
    def arrival(self) -> int:
        return self._cursor.arrival if self._cursor is not None else 0

    def resume(self, pos: int) -> None:
        """Decode from spool position `pos` on (what before it was decoded and stored)."""
        self._cursor.pos = pos

    def kernel_drops(self) -> int:
        """Datagrams the kernel dropped for this socket because its receive buffer was full
        (/proc/net/udp's `drops`; the last value read once the socket is closed)."""
        if self._closed:
            return self._drops
        for table in ("/proc/net/udp", "/proc/net/udp6"):
            try:
                with open(table) as f:
                    next(f)
                    for line in f:
                        cols = line.split()
                        if len(cols) >= 13 and cols[9] == str(self._inode):
                            self._drops = int(cols[12])
                            return self._drops
            except (OSError, ValueError, StopIteration):
                continue
        return self._drops

    def start(self) -> "Receiver":
        r, w = os.pipe()
        self._pipe = r
        args = [str(self.spool), str(self.spool_end)] if self.spool is not None else []
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ingest.xrootd_monitoring.recv_process", str(self.sock.fileno()), str(w), *args],
                pass_fds=(self.sock.fileno(), w), env={**os.environ, "PYTHONPATH": os.pathsep.join(
                    p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p)})
        finally:
            os.close(w)  # the child's end: EOF here once the child is gone
        self._thread.start()
        self._ready.wait()  # its first frame (or its end): from here on an idle time means no data
        return self

    def _read(self) -> None:
        """The pipe -> the queue, datagram by datagram (one read takes up to 1 MiB of them)."""
        put = self.queue.put
        buf = b""
        n = 0
        for chunk in _chunks(self._pipe, 1 << 20):
            buf = buf + chunk if buf else chunk
            off, end = 0, len(buf)
            while off + 2 <= end:
                (alen,) = _ADDR.unpack_from(buf, off)
                head = off + 2 + alen + 4
                if head > end:
                    break
                (plen,) = _LEN.unpack_from(buf, off + 2 + alen)
                if head + plen > end:
                    break
                if alen:
                    put((buf[head:head + plen], buf[off + 2:off + 2 + alen].decode()))
                    n += 1
                else:
                    self._ready.set()
                off = head + plen
            buf = buf[off:]
            self.received = n
        self._ready.set()
        os.close(self._pipe)

    def _read_ends(self) -> None:
        """The pipe's spool ends -> `end` (the spool holds the datagrams)."""
        buf = b""
        for chunk in _chunks(self._pipe, 1 << 16):
            buf += chunk
            whole = len(buf) - len(buf) % _POS.size
            if whole:
                (end,) = _POS.unpack_from(buf, whole - _POS.size)
                buf = buf[whole:]
                with self._cond:
                    self.end = end
                    self._cond.notify_all()
                self._ready.set()
        with self._cond:
            self._eof = True
            self._cond.notify_all()
        self._ready.set()
        os.close(self._pipe)

    def _spooled(self, timeout: float | None) -> tuple[bytes, str] | None:
        with self._cond:
            if not self._cursor.behind(self.end) and timeout != 0 and not self._eof:
                self._cond.wait(timeout)
            end = self.end
        item = self._cursor.next(end)
        if item is not None:
            self.received += 1
        return item

    def skipped_bytes(self) -> int:
        """Spool bytes removed by its bounds before they were decoded."""
        return self._cursor.skipped_bytes() if self._cursor is not None else 0

    def get(self, timeout: float | None) -> tuple[bytes, str] | None:
        if self.spool is not None:
            return self._spooled(timeout)
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_nowait(self) -> tuple[bytes, str] | None:
        if self.spool is not None:
            return self._spooled(0)
        try:
            return self.queue.get_nowait()
        except queue.Empty:
            return None

    def stop(self) -> None:
        """Stop receiving: what the kernel holds for the socket and what the process holds is
        queued first (a signal ends a run with everything received written)."""
        if self._stopped:
            return
        self._stopped = True
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
            self._proc.wait()
            self._thread.join()
        self.kernel_drops()
        self._closed = True
        self.sock.close()
