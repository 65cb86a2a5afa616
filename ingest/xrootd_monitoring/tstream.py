"""The I/O trace (`t`): 16-byte entries {arg0 (8 bytes); arg1 (i32); arg2 (u32)} after the header.

An entry whose first byte is below 0x80 is a read (arg1 = length >= 0) or a write (arg1 < 0) at
offset arg0 of the file with dictid arg2. Otherwise the first byte names it: 0x80 open (arg0's
lower 7 bytes: the file size), 0x90 readv / 0x91 readu (arg1: bytes read, arg2: the file),
0xa0 appid, 0xc0 close (arg2: the file), 0xd0 disc (arg2: the user), 0xe0 window (arg1: end of
the previous window, arg2: start of this one, unix seconds). Reads are counted per file here:
5.5 f-stream closes leave out pgread bytes, which the trace has; their offsets are kept too (a
cache's verdict per open: which blocks each open touched).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ingest.xrootd_monitoring.header import BadDatagram, Header

_ENTRY = struct.Struct(">qiI")
_WINDOW = struct.Struct(">ii")
OPEN, READV, READU, APPID, CLOSE, DISC, WINDOW = 0x80, 0x90, 0x91, 0xA0, 0xC0, 0xD0, 0xE0
_SIZE_MASK = (1 << 56) - 1


@dataclass(slots=True)
class Trace:
    """What one trace datagram says, in order of the files it names."""

    read_bytes: dict[int, int] = field(default_factory=dict)  # file dictid -> bytes read
    ranges: list[tuple[int, int, int]] = field(default_factory=list)  # (file dictid, offset, length) of reads
    opens: dict[int, int] = field(default_factory=dict)  # file dictid -> size
    closes: list[int] = field(default_factory=list)  # file dictids closed
    window: int = 0  # the last window start (unix seconds), 0: none


def decode(data: bytes, head: Header) -> Trace:
    if (head.plen - 8) % 16:
        raise BadDatagram("truncated", f"trace datagram of {head.plen} bytes: not whole 16-byte entries")
    out = Trace()
    reads = out.read_bytes
    for off in range(8, head.plen, 16):
        kind = data[off]
        if kind < 0x80:
            offset, buflen, dictid = _ENTRY.unpack_from(data, off)
            if buflen > 0:
                reads[dictid] = reads.get(dictid, 0) + buflen
                out.ranges.append((dictid, offset, buflen))
        elif kind == OPEN:
            val, _, dictid = _ENTRY.unpack_from(data, off)
            out.opens[dictid] = val & _SIZE_MASK
        elif kind in (READV, READU):
            _, buflen, dictid = _ENTRY.unpack_from(data, off)
            if buflen > 0:
                reads[dictid] = reads.get(dictid, 0) + buflen
        elif kind == CLOSE:
            out.closes.append(_ENTRY.unpack_from(data, off)[2])
        elif kind == WINDOW:
            _, start = _WINDOW.unpack_from(data, off + 8)
            out.window = start
    return out
