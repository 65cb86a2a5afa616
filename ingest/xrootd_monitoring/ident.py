"""The server ident (`=`): who the server is, sent every `ident` seconds (the first only after one
interval). Binary: the header, u32 dictid, then "prot/user.pid:sid@host\\n&pgm=..&ver=..&inst=..
&port=..&site=.." (NUL-terminated); JSON: {"code":"=",...,"src":{"site","host","port","inst",
"pgm","ver"}}."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.xrootd_monitoring.maps import cgi


@dataclass(frozen=True, slots=True)
class Ident:
    host: str
    port: int
    site: str
    inst: str
    program: str
    version: str
    sid: int | None


def _port(value: object) -> int:
    text = str(value or "0").strip()
    return int(text) if text.isdigit() else 0


def binary(who: str, info: str) -> Ident:
    kv = cgi(info)
    sid_text = who.rsplit("@", 1)[0].rsplit(":", 1)[-1]
    host = who.rsplit("@", 1)[-1] if "@" in who else ""
    return Ident(host, _port(kv.get("port")), kv.get("site", ""), kv.get("inst", ""), kv.get("pgm", ""),
                 kv.get("ver", ""), int(sid_text) if sid_text.isdigit() else None)


def from_json(head: dict) -> Ident:
    src = head.get("src") if type(head.get("src")) is dict else {}
    sid = head.get("sid")

    def s(key: str) -> str:
        v = src.get(key)
        return v if type(v) is str else ""

    return Ident(s("host"), _port(src.get("port")), s("site"), s("inst"), s("pgm"), s("ver"),
                 sid if type(sid) is int else None)


def xrootd_version(server: Ident | None) -> str | None:
    """The server's XRootD version as the xcache model's `xrootd_version` takes it ("v6.2.1" →
    "6.2.1"; None when no ident came, or it names no version)."""
    if server is None:
        return None
    v = server.version.strip()
    v = v[1:] if v[:1] in ("v", "V") else v
    return v if v[:1].isdigit() else None
