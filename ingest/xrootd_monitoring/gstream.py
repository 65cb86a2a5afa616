"""The g-stream: XrdPfc's (provider `C`) records, in the binary or the `send json insthdr` form.

Binary: the 8-byte header, then {i32 tBeg; i32 tEnd; i64 sID} (the top byte of sID names the
provider: C pfc, M ccm, T tcpmon, P tpc; the lower 48 bits are the server id), then the
provider's records as '\\n'-separated text (pfc: one JSON object per line), NUL-terminated.
JSON (`send json insthdr`): a first line {"code":"g","pseq":N,"stod","sid","src":{"site","host",
"port","inst"},"gs":{"type","tbeg","tend"}} (pseq space-padded), then the same records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import orjson

from ingest.xrootd_monitoring.header import BadDatagram, Header

_GHEAD = struct.Struct(">iiq")
_SID_MASK = (1 << 48) - 1


@dataclass(slots=True)
class GPacket:
    stod: int
    pseq: int
    sid: int
    provider: str  # C: the proxy file cache
    tbeg: int
    tend: int
    src: dict | None  # the JSON form's own statement of its server (site, host, port, inst)
    lines: list[str]  # the records, verbatim


def _records(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if ln.strip()]


def binary(data: bytes, head: Header) -> GPacket:
    if len(data) < 24:
        raise BadDatagram("truncated", f"g-stream datagram of {len(data)} bytes: shorter than its 24-byte header")
    tbeg, tend, sid = _GHEAD.unpack_from(data, 8)
    body = data[24:head.plen].split(b"\0", 1)[0]
    provider = chr((sid >> 56) & 0xFF)
    return GPacket(head.stod, head.pseq, sid & _SID_MASK, provider, tbeg, tend, None,
                   _records(body.decode("utf-8", "replace")))


def json_header(line: str) -> dict:
    """The JSON header line of a text packet (g-stream or ident); BadDatagram when it is none."""
    try:
        head = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise BadDatagram("garbage", "text datagram whose first line is not JSON") from None
    if type(head) is not dict or type(head.get("code")) is not str:
        raise BadDatagram("garbage", "text datagram whose first line has no \"code\"")
    return head


def _int(head: dict, key: str, where: dict | None = None) -> int:
    value = (head if where is None else where).get(key)
    if type(value) is int:
        return value
    if type(value) is str and value.strip().lstrip("-").isdigit():
        return int(value)
    raise BadDatagram("garbage", f"JSON g-stream header: field {key} is not an integer")


def text(head: dict, rest: list[str]) -> GPacket:
    """A `send json` g-stream packet from its parsed header line and its record lines."""
    gs = head.get("gs") if type(head.get("gs")) is dict else {}
    src = head.get("src") if type(head.get("src")) is dict else None
    provider = gs.get("type") if type(gs.get("type")) is str and gs.get("type") else "?"
    sid = head.get("sid")
    return GPacket(_int(head, "stod"), _int(head, "pseq") & 0xFF, sid & _SID_MASK if type(sid) is int else 0,
                   provider[:1], _int(gs, "tbeg", gs) if "tbeg" in gs else 0,
                   _int(gs, "tend", gs) if "tend" in gs else 0, src, [ln for ln in rest if ln.strip()])
