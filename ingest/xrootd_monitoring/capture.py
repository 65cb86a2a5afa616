"""Raw UDP captures of XRootD monitoring (shared/xcache-lab's capture.py format: the magic
`XCLUDP1\\n`, then per datagram `f64 time, u16 port, u32 len` little-endian and the payload), read
back to replay a real server's datagrams to `collect` (tests, scripts/bench_collect.py)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

MAGIC = b"XCLUDP1\n"
_RECORD = struct.Struct("<dHI")


def read_capture(path: str | Path) -> list[bytes]:
    """The datagrams of a capture (gzip-compressed when its name ends in .gz), in order."""
    path = Path(path)
    data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    if data[:len(MAGIC)] != MAGIC:
        raise ValueError(f"{path}: not a capture (no {MAGIC!r} at its start)")
    out, off = [], len(MAGIC)
    while off < len(data):
        if off + _RECORD.size > len(data):
            raise ValueError(f"{path}: truncated at byte {off}")
        _, _, n = _RECORD.unpack_from(data, off)
        off += _RECORD.size
        if off + n > len(data):
            raise ValueError(f"{path}: truncated at byte {off}")
        out.append(data[off:off + n])
        off += n
    return out
