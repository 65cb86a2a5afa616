"""dcache-json: dCache billing records as JSON (the Kafka billing topic, or billing files written
with billing.format.json=true), one object per line. Field names follow dCache's
notification/*MessageSerializer.java.

What each msgType becomes:
* `transfer` (MoverInfoMessage, from a pool): isWrite "write" -> write, "read" -> read;
  bytes = transferSize, file size = fileSize (writes: the larger); server = cellName (the pool);
  client = protocolInfo.host; path = billingPath (else transferPath); ts = date minus
  transferTime ms. Skipped: status.code != 0 (failed), isP2p (pool-to-pool copy), reads of 0 bytes.
* `request` (door): skipped, the pool's transfer record carries the bytes.
* `remove`: from a door -> delete; from a pool -> skipped (one replica cleaned).
* `store` / `restore` (tape), `hit`, `warning`: skipped, not client accesses.
vo hint: the first FQAN (`/atlas/...`) or GroupNamePrincipal in `subject`.
"""

from __future__ import annotations

import re

import orjson

from ingest.formats._base import (
    Access,
    BadRecord,
    Format,
    ParseContext,
    Reject,
    iso_us,
    json_object,
    skip,
    text,
    uint,
)

NAME = "dcache-json"

_loads = orjson.loads
_FQAN = re.compile(r"FQAN(?:Principal)?\[/([A-Za-z0-9_.-]+)")
_GROUP = re.compile(r"GroupNamePrincipal\[([A-Za-z0-9_.-]+)")


def _vo(subject: object) -> str:
    if type(subject) is list:
        for principal in subject:
            if type(principal) is str:
                m = _FQAN.search(principal)
                if m:
                    return m.group(1).lower()
        for principal in subject:
            if type(principal) is str:
                m = _GROUP.search(principal)
                if m:
                    return m.group(1).lower()
    return ""


def _status(rec: dict) -> tuple[int, str]:
    status = rec.get("status")
    if type(status) is dict:
        code = status.get("code", 0)
        if type(code) is not int:
            try:
                code = int(code)
            except (TypeError, ValueError):
                raise BadRecord(f"field status.code: not an integer: {code!r}"[:120]) from None
        msg = status.get("msg")
        return code, msg if type(msg) is str else ""
    if status is None:
        return 0, ""
    raise BadRecord("field status: not an object")


def _path(rec: dict) -> str:
    for key in ("billingPath", "transferPath"):
        value = rec.get(key)
        if type(value) is str and value and value != "Unknown":
            return value
    pnfsid = rec.get("pnfsid")
    if type(pnfsid) is str and pnfsid:
        return f"pnfsid:{pnfsid}"
    raise BadRecord("field billingPath: missing (and no pnfsid)")


def _server(rec: dict) -> str:
    cell = rec.get("cellName")
    return cell.split("@", 1)[0] if type(cell) is str else ""


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    rec = json_object(line, _loads)
    msg_type = rec.get("msgType")
    if msg_type == "transfer":
        code, msg = _status(rec)
        if code != 0:
            return skip(f"failed transfer (status {code}: {msg})")
        if rec.get("isP2p") is True:
            return skip("pool-to-pool copy (isP2p)")
        is_write = rec.get("isWrite")
        if is_write not in ("read", "write"):
            raise BadRecord(f"field isWrite: expected \"read\" or \"write\", got {is_write!r}"[:120])
        ts = iso_us(rec.get("date"), "date", ctx.tz)
        duration = rec.get("transferTime")
        if duration is not None:
            ts -= uint(duration, "transferTime") * 1000
        transferred = uint(rec.get("transferSize"), "transferSize")
        size = uint(rec.get("fileSize"), "fileSize")
        path = _path(rec)
        proto = rec.get("protocolInfo")
        client = proto.get("host", "") if type(proto) is dict else ""
        if type(client) is not str:
            client = ""
        vo = _vo(rec.get("subject"))
        if is_write == "write":
            return Access(ts, path, size if size >= transferred else transferred, transferred, "write",
                          _server(rec), client, vo)
        if transferred == 0:
            return skip("zero-byte read (open without data)")
        return Access(ts, path, size, transferred, "read", _server(rec), client, vo)
    if msg_type == "remove":
        code, msg = _status(rec)
        if code != 0:
            return skip(f"failed removal (status {code}: {msg})")
        if rec.get("cellType") == "pool":
            return skip("pool replica removal (the namespace removal is the door's record)")
        path = _path(rec)
        if path.startswith("pnfsid:"):
            return skip(f"removal without a path ({path})")
        client = rec.get("client")
        return Access(iso_us(rec.get("date"), "date", ctx.tz), path, 0, 0, "delete", "",
                      client if type(client) is str else "", _vo(rec.get("subject")))
    if msg_type == "request":
        return skip("door request (the pool's transfer record carries the bytes)")
    if msg_type in ("store", "restore"):
        return skip(f"tape {msg_type} (not a client access)")
    if msg_type in ("hit", "warning"):
        return skip(f"billing {msg_type} message (not a client access)")
    if msg_type is None:
        raise BadRecord("field msgType: missing")
    raise BadRecord(f"field msgType: unknown value {text(msg_type, 'msgType')[:40]!r}")


FORMAT = Format(NAME, _parse, __doc__ or "")
