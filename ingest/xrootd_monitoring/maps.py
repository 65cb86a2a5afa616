"""Map (dictionary) records: the header, u32 dictid, then "who\\ninfo" (NUL-terminated).

`who` is "prot/user.pid:sid@host"; info depends on the code: `u` user login (the CGI of the
client: &R=..&x=..), `d` the path opened under this dictid (the file's id in the f-stream and
the trace), `i` application info, `p` purge, `r` redirect, `x` transfer, `=` the server ident.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ingest.xrootd_monitoring.header import BadDatagram, Header

_DICTID = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class MapRecord:
    code: str
    dictid: int
    who: str
    info: str


def decode(data: bytes, head: Header) -> MapRecord:
    if head.plen < 12:
        raise BadDatagram("truncated", f"map record '{head.code}' of {head.plen} bytes: no dictid")
    (dictid,) = _DICTID.unpack_from(data, 8)
    text = data[12:head.plen].split(b"\0", 1)[0].decode("utf-8", "replace")
    who, _, info = text.partition("\n")
    return MapRecord(head.code, dictid, who, info)


def client_host(who: str) -> str:
    """The client's host of "prot/user.pid:sid@host" ('[::ffff:1.2.3.4]' -> '1.2.3.4')."""
    host = who.rsplit("@", 1)[-1] if "@" in who else ""
    host = host.strip("[]")
    return host[7:] if host.startswith("::ffff:") else host


def cgi(info: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in info.split("&"):
        key, eq, value = part.partition("=")
        if eq and key:
            out[key] = value
    return out
