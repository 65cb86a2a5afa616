"""The header of a monitoring datagram and its stream kind.

Binary datagrams start with XrdXrootdMonHeader {char code; u8 pseq; u16 plen; i32 stod} in
network order; plen is the datagram's length. A g-stream sent in a text form (`send json`) starts
with '{' instead: its first line is a JSON header ({"code": "g", "pseq", "stod", "sid", "src",
"gs"}; the ident is {"code": "=", ...}).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

HEADER = struct.Struct(">cBHi")
#: the largest datagram an XRootD server sends (its monitoring buffer is at most 64 KiB)
MAX_DATAGRAM = 65535


class BadDatagram(Exception):
    """A datagram that cannot be decoded; `kind` counts it (garbage, truncated, oversized)."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


@dataclass(frozen=True, slots=True)
class Header:
    code: str
    pseq: int
    plen: int
    stod: int


def binary_header(data: bytes) -> Header:
    """The header of a binary datagram, checked against the datagram's length."""
    if len(data) < HEADER.size:
        raise BadDatagram("truncated", f"{len(data)} bytes: shorter than the 8-byte header")
    code, pseq, plen, stod = HEADER.unpack_from(data, 0)
    if not (0x21 <= code[0] <= 0x7e):
        raise BadDatagram("garbage", f"code byte 0x{code[0]:02x} is no stream code")
    if plen > len(data):
        raise BadDatagram("truncated", f"{len(data)} bytes, but its header says {plen}")
    if plen < len(data) and any(data[plen:]):  # XRootD pads nothing; trailing zeros are harmless
        raise BadDatagram("oversized", f"{len(data)} bytes, but its header says {plen}")
    return Header(code.decode("ascii"), pseq, plen, stod)


def seq_kind(code: str) -> str | None:
    """The packet-sequence counter a binary datagram of this code advances (None: not counted)."""
    if code in ("f", "g"):
        return code
    if code in "=dituprx":  # the ident shares the detailed monitor's counter (seen in 5.5.3)
        return "detail"
    return None
