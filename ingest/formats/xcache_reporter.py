"""xcache-reporter: documents of the ATLAS XCache cinfo reporter (slateci/XCache
cacheReporter/reporter.py), one JSON object per line, or a JSON array of them per line (the
reporter POSTs lists). One document per access record of a file's .cinfo: sender "xCache",
type "docs", site, file (`<scope>/<h1>/<h2>/<name>`: the reporter strips '/atlas/rucio/'),
size, created_at (ms), blocks, blocks_cached, access (index), attached_at (ms), detached_at (ms),
ios, duration, bytes_hit, bytes_miss, bytes_bypassed, bytes_written.

* a document -> read; bytes = bytes_hit + bytes_miss + bytes_bypassed; observed_* = those;
  ts = attached_at; server = the document's `host` (logstash adds it), else --server;
  site = the document's site.
* Skipped: documents of other types, accesses that served 0 bytes.
"""

from __future__ import annotations

import orjson

from ingest.formats._base import Access, BadRecord, Format, ParseContext, Reject, epoch_us, opt_text, skip, uint

NAME = "xcache-reporter"
_loads = orjson.loads


def _doc(rec: object, ctx: ParseContext) -> Access | Reject:
    if type(rec) is not dict:
        return Reject(f"array element is not a JSON object but {type(rec).__name__}")
    kind = rec.get("type")
    if kind is not None and kind != "docs":
        return skip(f"reporter document of type {opt_text(kind)[:40]!r} (not an access)")
    try:
        path = rec.get("file")
        if type(path) is not str or not path:
            raise BadRecord("field file: missing or not a string")
        if not path.startswith("/") and "/rucio/" not in path and path.count("/") >= 3:
            path = "rucio/" + path  # the reporter stripped /atlas/rucio/ from the cinfo path
        size = uint(rec.get("size"), "size")
        if "bytes_hit" not in rec and "bytes_miss" not in rec:  # no counters: not an access of 0 bytes
            raise BadRecord("fields bytes_hit and bytes_miss: missing")
        hit = uint(rec.get("bytes_hit", 0), "bytes_hit")
        miss = uint(rec.get("bytes_miss", 0), "bytes_miss")
        bypass = uint(rec.get("bytes_bypassed", 0), "bytes_bypassed")
        served = hit + miss + bypass
        if served == 0:
            return skip("cache access that served 0 bytes")
        when = rec.get("attached_at")
        ts = epoch_us(when, "attached_at") if when else epoch_us(rec.get("detached_at"), "detached_at")
        server = opt_text(rec.get("host")) or ctx.server
        return Access(ts, path, size, served, "read", server, "", "", opt_text(rec.get("site")), hit, miss, bypass)
    except BadRecord as exc:
        return Reject(exc.reason, exc.skipped)


def _parse(line: str, ctx: ParseContext) -> Access | Reject | list:
    try:
        obj = _loads(line)
    except ValueError as exc:
        raise BadRecord(f"not valid JSON: {exc}") from None
    if type(obj) is list:
        if not obj:
            return skip("empty document list")
        return [_doc(rec, ctx) for rec in obj]
    if type(obj) is not dict:
        raise BadRecord(f"not a JSON object but {type(obj).__name__}")
    return _doc(obj, ctx)


FORMAT = Format(NAME, _parse, __doc__ or "")
