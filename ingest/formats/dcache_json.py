"""dcache-json: dCache billing records as JSON (the Kafka billing topic, or billing files written
with billing.format.json=true), one object per line. Field names follow dCache's
notification/*MessageSerializer.java.

What each msgType becomes:
* `transfer` (MoverInfoMessage, from a pool): isWrite "write" -> write, "read" -> read;
  bytes = transferSize, file size = fileSize (writes: the larger); server = cellName (the pool);
  client = protocolInfo.host; path = billingPath (else transferPath); ts = date (the record's
  time, at the end of the transfer: the start is not logged). Skipped: status.code != 0 (failed), isP2p (pool-to-pool copy), reads of 0 bytes.
* `request` (door): skipped, the pool's transfer record carries the bytes.
* `remove`: from a door -> delete; from a pool -> skipped (one replica cleaned).
* `store` / `restore` (tape), `hit`, `warning`: skipped, not client accesses.
vo hint: the first FQAN (`/atlas/...`) or GroupNamePrincipal in `subject`.
Records are decoded into a typed record (unknown keys ignored): a field of the wrong JSON type
is rejected with its name.
"""

from __future__ import annotations

import re
from typing import Union

import msgspec

from ingest.formats._base import Access, BadRecord, Format, ParseContext, Reject, decode_struct, iso_us, skip, uint

NAME = "dcache-json"

Number = Union[int, float, str, None]


class _Status(msgspec.Struct):
    code: Number = 0
    msg: Union[str, None] = None


class _Protocol(msgspec.Struct):
    host: Union[str, None] = None


class _Record(msgspec.Struct):
    msgType: Union[str, None] = None
    date: Union[str, None] = None
    cellName: Union[str, None] = None
    cellType: Union[str, None] = None
    status: Union[_Status, None] = None
    isP2p: Union[bool, None] = None
    isWrite: Union[str, None] = None
    transferSize: Number = None
    fileSize: Number = None
    billingPath: Union[str, None] = None
    transferPath: Union[str, None] = None
    pnfsid: Union[str, None] = None
    protocolInfo: Union[_Protocol, None] = None
    subject: Union[list, None] = None
    client: Union[str, None] = None


_decoder = msgspec.json.Decoder(_Record)
_FQAN = re.compile(r"FQAN(?:Principal)?\[/([A-Za-z0-9_.-]+)")
_GROUP = re.compile(r"GroupNamePrincipal\[([A-Za-z0-9_.-]+)")


def _vo(subject: list | None) -> str:
    if subject:
        for rx in (_FQAN, _GROUP):
            for principal in subject:
                if type(principal) is str:
                    m = rx.search(principal)
                    if m:
                        return m.group(1).lower()
    return ""


def _status(rec: _Record) -> tuple[int, str]:
    status = rec.status
    if status is None:
        return 0, ""
    code = status.code
    if type(code) is not int:
        try:
            code = int(code)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise BadRecord(f"field status.code: not an integer: {str(code)[:40]!r}") from None
    return code, status.msg or ""


def _path(rec: _Record) -> str:
    for value in (rec.billingPath, rec.transferPath):
        if value and value != "Unknown":
            return value
    if rec.pnfsid:
        return f"pnfsid:{rec.pnfsid}"
    raise BadRecord("field billingPath: missing (and no pnfsid)")


def _server(rec: _Record) -> str:
    cell = rec.cellName
    return cell.split("@", 1)[0] if cell else ""


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    rec = decode_struct(_decoder, line)
    msg_type = rec.msgType
    if msg_type == "transfer":
        code, msg = _status(rec)
        if code != 0:
            return skip(f"failed transfer (status {code}: {msg})")
        if rec.isP2p:
            return skip("pool-to-pool copy (isP2p)")
        is_write = rec.isWrite
        if is_write != "read" and is_write != "write":
            raise BadRecord(f"field isWrite: expected \"read\" or \"write\", got {is_write!r}"[:120])
        ts = iso_us(rec.date, "date", ctx.tz)
        transferred = uint(rec.transferSize, "transferSize")
        size = uint(rec.fileSize, "fileSize")
        path = _path(rec)
        proto = rec.protocolInfo
        client = (proto.host or "") if proto is not None else ""
        vo = _vo(rec.subject)
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
        if rec.cellType == "pool":
            return skip("pool replica removal (the namespace removal is the door's record)")
        path = _path(rec)
        if path.startswith("pnfsid:"):
            return skip(f"removal without a path ({path})")
        return Access(iso_us(rec.date, "date", ctx.tz), path, 0, 0, "delete", "", rec.client or "", _vo(rec.subject))
    if msg_type == "request":
        return skip("door request (the pool's transfer record carries the bytes)")
    if msg_type == "store" or msg_type == "restore":
        return skip(f"tape {msg_type} (not a client access)")
    if msg_type == "hit" or msg_type == "warning":
        return skip(f"billing {msg_type} message (not a client access)")
    if msg_type is None:
        raise BadRecord("field msgType: missing")
    raise BadRecord(f"field msgType: unknown value {msg_type[:40]!r}")


FORMAT = Format(NAME, _parse, __doc__ or "")
