"""xrootd-gstream: XRootD proxy file cache (XCache) g-stream JSON, one object per line.

Records are XrdPfc's `file_close` (emitted on the last detach of a file: size, blk_size, n_blks,
n_blks_done, access_cnt, attach_t, detach_t, remotes, b_hit, b_miss, b_bypass [, b_todisk,
b_prefetch, n_cks_errs]); documents of the ATLAS `xc-gstream` index (the same keys, `event`
possibly absent, plus `host`/`site`) parse the same way.

* file_close -> read; bytes = b_hit + b_miss + b_bypass (the bytes clients were served; b_todisk
  and b_prefetch are cache-side); observed_hit/miss/bypass = b_hit/b_miss/b_bypass as reported;
  ts = attach_t (attach/detach are those of the last access; one record merges concurrent
  opens); server = the record's `host`, else the host of the last packet header in the stream
  (`{"code":"g",...,"src":{"host":...}}` or `{"siteID":...,"hostID":...}`), else --server.
* Decoded into a struct of the keys above (msgspec skips the others unread: a third of the cost
  of a dict); a line that does not decode so is parsed as a dict, which names its problem.
* Skipped: packet headers (they only set the server/site for the records after them), other
  events, closes that served 0 bytes.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from cachescope._simcore import GstreamColumns as _GstreamColumns
from ingest.formats._base import (
    U64_MAX,
    Access,
    BadRecord,
    Format,
    ParseContext,
    Reject,
    epoch_us,
    json_object,
    skip,
    text,
    uint,
)

NAME = "xrootd-gstream"
_loads = orjson.loads


def _header(rec: dict, ctx: ParseContext) -> Reject:
    src = rec.get("src")
    host = site = ""
    if type(src) is dict:
        host = src.get("host") if type(src.get("host")) is str else ""
        site = src.get("site") if type(src.get("site")) is str else ""
    elif type(rec.get("hostID")) is str:
        host = rec["hostID"].rsplit(":", 1)[0]
        site = rec.get("siteID") if type(rec.get("siteID")) is str else ""
    ctx.state["gstream_host"] = host
    ctx.state["gstream_site"] = site
    return skip(f"g-stream packet header (server {host or '?'})")


def cache_record(rec: dict, ctx: ParseContext, keys: tuple[str, ...]) -> Access | Reject:
    """A cache file-close record; `keys` name path, size, hit, miss, bypass, attach, detach."""
    k_path, k_size, k_hit, k_miss, k_bypass, k_attach, k_detach = keys
    path = rec.get(k_path)
    if type(path) is not str or not path:
        raise BadRecord(f"field {k_path}: missing or not a string")
    size = uint(rec.get(k_size), k_size)
    if k_hit not in rec and k_miss not in rec:  # a record without its byte counters is no access of 0 bytes
        raise BadRecord(f"fields {k_hit} and {k_miss}: missing")
    hit = uint(rec.get(k_hit, 0), k_hit)
    miss = uint(rec.get(k_miss, 0), k_miss)
    bypass = uint(rec.get(k_bypass, 0), k_bypass)
    served = hit + miss + bypass
    if served == 0:
        return skip("cache access that served 0 bytes")
    when = rec.get(k_attach)
    if when is None or when == 0:
        when = rec.get(k_detach)
        ts = epoch_us(when, k_detach)
    else:
        ts = epoch_us(when, k_attach)
    host = rec.get("host")
    server = host if type(host) is str and host else ctx.state.get("gstream_host") or ctx.server
    site = rec.get("site")
    if type(site) is not str or not site:
        site = ctx.state.get("gstream_site") or ""
    return Access(ts, path, size, served, "read", server, "", "", site, hit, miss, bypass)


_KEYS = ("lfn", "size", "b_hit", "b_miss", "b_bypass", "attach_t", "detach_t")


def _parse_dict(line: str, ctx: ParseContext) -> Access | Reject:
    rec = json_object(line, _loads)
    event = rec.get("event")
    if event == "file_close" or (event is None and "lfn" in rec and "b_hit" in rec):
        return cache_record(rec, ctx, _KEYS)
    if rec.get("code") == "g" or "hostID" in rec:
        return _header(rec, ctx)
    if event is None:
        raise BadRecord("field event: missing (not a g-stream record)")
    return skip(f"g-stream event {text(event, 'event')[:40]!r} (not a file close)")


_UNSET = msgspec.UNSET
_SECONDS_BELOW = 1e11  # an epoch number below this is seconds (epoch_us's rule)


class _Record(msgspec.Struct, gc=False):
    """The keys a g-stream line may use (UNSET: absent)."""

    event: Any = _UNSET
    lfn: Any = _UNSET
    size: Any = _UNSET
    b_hit: Any = _UNSET
    b_miss: Any = _UNSET
    b_bypass: Any = _UNSET
    attach_t: Any = _UNSET
    detach_t: Any = _UNSET
    host: Any = _UNSET
    site: Any = _UNSET
    code: Any = _UNSET
    src: Any = _UNSET
    hostID: Any = _UNSET  # noqa: N815 - the record's key
    siteID: Any = _UNSET  # noqa: N815


_decode = msgspec.json.Decoder(_Record).decode
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def _present(value: Any) -> Any:
    return None if value is _UNSET else value


def _close(r: _Record, ctx: ParseContext) -> Access | Reject:
    """cache_record() over the struct (same checks, same reasons)."""
    path = r.lfn
    if type(path) is not str or not path:
        raise BadRecord("field lfn: missing or not a string")
    # plain JSON integers in range (nearly every record) are taken as they are, without a call;
    # anything else goes through uint()/epoch_us(), which convert or name the problem
    size = r.size
    if type(size) is not int or not 0 <= size <= U64_MAX:
        size = uint(_present(size), "size")
    hit, miss, bypass = r.b_hit, r.b_miss, r.b_bypass
    if hit is _UNSET and miss is _UNSET:
        raise BadRecord("fields b_hit and b_miss: missing")
    if type(hit) is not int or not 0 <= hit <= U64_MAX:
        hit = uint(0 if hit is _UNSET else hit, "b_hit")
    if type(miss) is not int or not 0 <= miss <= U64_MAX:
        miss = uint(0 if miss is _UNSET else miss, "b_miss")
    if type(bypass) is not int or not 0 <= bypass <= U64_MAX:
        bypass = uint(0 if bypass is _UNSET else bypass, "b_bypass")
    served = hit + miss + bypass
    if served == 0:
        return skip("cache access that served 0 bytes")
    when = r.attach_t
    if type(when) is int and 0 < when < _SECONDS_BELOW:  # epoch seconds
        ts = when * 1_000_000
    elif when is _UNSET or when is None or when == 0:
        ts = epoch_us(_present(r.detach_t), "detach_t")
    else:
        ts = epoch_us(when, "attach_t")
    host = r.host
    server = host if type(host) is str and host else ctx.state.get("gstream_host") or ctx.server
    site = r.site
    if type(site) is not str or not site:
        site = ctx.state.get("gstream_site") or ""
    return Access(ts, path, size, served, "read", server, "", "", site, hit, miss, bypass)


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    if line[:1] == "g" and len(line) > 24 and line[24:25] == "{":
        line = line[24:]  # insthdr: 24-byte binary prefix before the header JSON
    try:
        r = _decode(line)
    except _DECODE_ERRORS:
        return _parse_dict(line, ctx)  # not a JSON object (or a damaged one): the dict parse names why
    event = r.event
    if event == "file_close" or ((event is _UNSET or event is None) and r.lfn is not _UNSET
                                 and r.b_hit is not _UNSET):
        return _close(r, ctx)
    if r.code == "g" or r.hostID is not _UNSET:
        return _header({k: v for k, v in (("src", r.src), ("hostID", r.hostID), ("siteID", r.siteID))
                        if v is not _UNSET}, ctx)
    if event is _UNSET or event is None:
        raise BadRecord("field event: missing (not a g-stream record)")
    return skip(f"g-stream event {text(event, 'event')[:40]!r} (not a file close)")


# The same parse and the Enricher, compiled (simcore/src/gstream.rs), over lists of lines straight
# into event columns: it takes the file closes and headers it can decide exactly as _parse and the
# Enricher do and declines the rest (Python then parses and enriches that line and pushes its event);
# tests/python/test_gstream_fast.py compares both paths.


def _columns(ctx: ParseContext, enrich: Any) -> Any:
    """A compiled column builder for this stream (None: the Python path)."""
    if _GstreamColumns is None or enrich.source != NAME:  # None: the Python path (the tests' reference)
        return None
    return _GstreamColumns(enrich.source, enrich.origin, enrich.site, enrich.site_override, ctx.server,
                           enrich.site_vo, enrich.resolve_path, enrich.group_for)


FORMAT = Format(NAME, _parse, __doc__ or "", columns=_columns)
