"""gzip of a large answer on all cores, as pigz makes it: the body is cut into chunks deflated in
parallel threads (zlib leaves the GIL), each primed with the 32 KiB before it and ended by a sync
flush, and the pieces are joined into one deflate stream in one gzip member. Any gzip reader
takes it; it is as small as gzip.compress's within a fraction of a percent.

Why: the gzip of a 30-day answer by tier (14.5 MB) took 156 ms on one core, four times the
answer's own computation, and every client that joined that answer waited for it."""

from __future__ import annotations

import gzip
import os
import struct
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor

#: bytes per piece: large enough that a piece's own flush and start cost nothing
CHUNK = 1 << 20
#: deflate's window: each piece is primed with this much of the body before it
_WINDOW = 32 * 1024

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=cores(), thread_name_prefix="gzip")
        return _pool


def _deflate(body: memoryview, a: int, b: int, level: int) -> bytes:
    zdict = bytes(body[max(0, a - _WINDOW):a])
    c = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY,
                         **({"zdict": zdict} if zdict else {}))
    return c.compress(body[a:b]) + c.flush(zlib.Z_FINISH if b == len(body) else zlib.Z_SYNC_FLUSH)


def gzip_bytes(body: bytes, level: int = 1) -> bytes:
    """The gzip of `body` (mtime 0): gzip.compress's for one chunk or one core, else made in parallel."""
    if len(body) <= CHUNK or cores() < 2:
        return gzip.compress(body, compresslevel=level, mtime=0)
    view = memoryview(body)
    pool = _executor()
    parts = [pool.submit(_deflate, view, a, min(a + CHUNK, len(body)), level) for a in range(0, len(body), CHUNK)]
    crc = zlib.crc32(view)  # meanwhile, on this thread
    head = gzip.compress(b"", compresslevel=level, mtime=0)[:10]  # gzip.compress's header, whatever the version
    return b"".join([head, *(p.result() for p in parts), struct.pack("<II", crc, len(body) & 0xFFFFFFFF)])
