"""The UDP socket and its receiving thread: it does nothing but receive into a queue, so a burst
is held in memory (and the kernel's buffer, made large) while decoding runs elsewhere."""

from __future__ import annotations

import queue
import socket
import threading
from urllib.parse import urlparse

from cachescope.errors import UsageError

#: the receive buffer asked for (the kernel caps SO_RCVBUF at net.core.rmem_max unless the
#: process may force it): 20k datagrams/s of ~1 KiB for a second and more
RCVBUF_BYTES = 64 << 20
_RECV_BYTES = 65536  # a UDP payload is at most 65,507 bytes


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


class Receiver:
    """Binds at once (a port in use fails here); `start()` starts the thread; `get(timeout)` gives
    (payload, sender address) or None; `stop()` ends the thread and closes the socket."""

    def __init__(self, host: str, port: int):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        for opt in (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF):
            if opt is None:
                continue
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, opt, RCVBUF_BYTES)
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
        self.sock.settimeout(0.2)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="collect-recv", daemon=True)

    def start(self) -> "Receiver":
        self._thread.start()
        return self

    def _run(self) -> None:
        recv, put, stop = self.sock.recvfrom, self.queue.put, self._stop.is_set
        n = 0
        while not stop():
            try:
                data, addr = recv(_RECV_BYTES)
            except (socket.timeout, InterruptedError):
                continue
            except OSError:
                if stop():
                    break
                continue
            put((data, addr[0]))
            n += 1
            self.received = n

    def get(self, timeout: float | None) -> tuple[bytes, str] | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_nowait(self) -> tuple[bytes, str] | None:
        try:
            return self.queue.get_nowait()
        except queue.Empty:
            return None

    def stop(self) -> None:
        """Stop receiving and close the socket; what the kernel holds for it is queued first (a
        signal ends a run with everything received written)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.sock.fileno() >= 0:
            self.sock.setblocking(False)
            while True:
                try:
                    data, addr = self.sock.recvfrom(_RECV_BYTES)
                except OSError:  # BlockingIOError: nothing left
                    break
                self.queue.put((data, addr[0]))
                self.received += 1
            self.sock.close()
