"""xrootd-gstream: XRootD proxy file cache (XCache) g-stream JSON, one object per line.

Records are XrdPfc's `file_close` (emitted on the last detach of a file: size, blk_size, n_blks,
n_blks_done, access_cnt, attach_t, detach_t, remotes, b_hit, b_miss, b_bypass [, b_todisk,
b_prefetch, n_cks_errs]); documents of the ATLAS `xc-gstream` index (the same keys, `event`
possibly absent, plus `host`/`site`) parse the same way.

* file_close -> read; bytes = b_hit + b_miss + b_bypass (the bytes clients were served; b_todisk
  and b_prefetch are cache-side); observed_hit/miss/bypass bytes = b_hit/b_miss/b_bypass (the
  Enricher clamps them to the bytes read); observed_hit = 1 when nothing was fetched from the
  origin for the access (`remotes` empty, b_todisk/b_prefetch 0 when present, no miss or bypass
  bytes), 0 when something was, null when the record has neither `remotes` nor `b_todisk`;
  observed_origin_bytes = b_todisk + b_bypass (XRootD >= 5.7.2: what came from the origin while
  the file was attached, prefetch included; not clamped to the bytes read; above 2⁶³ - 1 a
  reject), null without b_todisk;
  ts = attach_t (attach/detach are those of the file's attach: opens overlapping it are merged
  into one record); server = the record's `host`, else the host of the last packet header or
  server ident in the stream (`{"code":"g"|"=",...,"src":{"host":...}}` or
  `{"siteID":...,"hostID":...}`), else --server.
* `access_cnt` (the file's cumulative attach count in the cache) against the previous record of
  the file on that server: grown by k > 1 (at most 64), the record is k accesses (the rule and
  its limits: cachescope/events.py). Kept per server and file in the stream's state.
* Raw binary datagrams kept as lines (24-byte header, then the JSON records): the header is
  stripped, also when its bytes hold a newline and the relay split it over two lines (the pieces
  before the JSON are held until the line that completes the header, then skipped). A header is
  one only if a JSON record decodes within its 24 bytes: a line starting with `g` that has none,
  and held pieces that nothing completes, are rejects with their reason.
* Decoded into a struct of the keys above (msgspec skips the others unread: a third of the cost
  of a dict); a line that does not decode so is parsed as a dict, which names its problem.
* Skipped: packet headers and server idents (they only set the server/site for the records
  after them), other events, closes that served 0 bytes.

`cache_record(rec, ctx, GSTREAM_KEYS)` is the record -> Access (or a list of them) function: a
dict of one record and the names of its path, size, counter and time keys (the collector's cache
events use others); the server is the record's `host`, else the last header's, else
`ctx.server`; that and its access_cnt memory live in `ctx.state["gstream"]` (a GstreamState,
shared with the compiled decoder). The collector formats
and `cachescope collect` reuse it.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from cachescope.specs import GstreamColumns, GstreamState
from ingest.formats._base import (
    U64_MAX,
    Access,
    HELD_PENDING,
    HELD_VERDICT,
    BadRecord,
    Format,
    Held,
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


def _stream(ctx: ParseContext) -> GstreamState:
    """The stream's g-stream memory (the last header's server and site, access_cnt per server and
    file): one object, shared with the compiled decoder (simcore/src/gstream.rs)."""
    st = ctx.state.get("gstream")
    if st is None:
        st = ctx.state["gstream"] = GstreamState()
    return st


def _header(rec: dict, ctx: ParseContext) -> Reject:
    src = rec.get("src")
    host = site = ""
    if type(src) is dict:
        host = src.get("host") if type(src.get("host")) is str else ""
        site = src.get("site") if type(src.get("site")) is str else ""
    elif type(rec.get("hostID")) is str:
        host = rec["hostID"].rsplit(":", 1)[0]
        site = rec.get("siteID") if type(rec.get("siteID")) is str else ""
    st = _stream(ctx)
    st.host = host
    st.site = site
    what = "XRootD server ident" if rec.get("code") == "=" else "g-stream packet header"
    return skip(f"{what} (server {host or '?'})")


MAX_SPLIT = 64  # accesses one record may stand for (gstream.rs: the rule); a larger jump of access_cnt is a restart
COUNTS_LIMIT = 1_000_000  # files remembered per server before the memory starts over


def _verdict(remotes: Any, todisk: Any, prefetch: Any, miss: int, bypass: int) -> int | None:
    """observed_hit: 1 nothing fetched from the origin, 0 fetched, None the record does not say."""
    says = type(remotes) is list
    fetched = says and len(remotes) > 0
    for value, name in ((todisk, "b_todisk"), (prefetch, "b_prefetch")):
        if value is None or value is _UNSET:
            continue
        if type(value) is not int or not 0 <= value <= U64_MAX:
            value = uint(value, name)
        says = True
        fetched = fetched or value > 0
    if not says:
        return None
    return 0 if fetched or miss or bypass else 1


_I64_MAX = 2**63 - 1  # the observed columns are int64


def _origin(todisk: Any, bypass: int) -> int | None:
    """observed_origin_bytes: b_todisk + b_bypass, None without b_todisk (checked by _verdict)."""
    if todisk is None or todisk is _UNSET:
        return None
    if type(todisk) is not int:
        todisk = uint(todisk, "b_todisk")
    origin = todisk + bypass
    if origin > _I64_MAX:
        raise BadRecord(f"fields b_todisk + b_bypass: {origin} bytes from the origin is above 2^63 - 1")
    return origin


def _accesses(ctx: ParseContext, server: str, path: str, count: Any) -> int:
    """How many accesses a record of `path` on `server` stands for (1, or the growth of its
    access_cnt since the previous record of it); remembers the count."""
    if type(count) is not int or not 1 <= count <= U64_MAX:
        return 1
    # the rule (MAX_SPLIT, COUNTS_LIMIT) is GstreamState's, in simcore/src/gstream.rs
    return _stream(ctx).accesses(server, path, count)


def _split(k: int, ts: int, path: str, size: int, hit: int, miss: int, bypass: int, server: str, site: str,
           verdict: int | None, origin: int | None = None, duration: int | None = None) -> list[Access]:
    """k accesses of one record: each counter split evenly, remainders to the first (each keeps
    the attach's duration)."""
    out = []
    for i in range(k):
        h = hit // k + (i < hit % k)
        m = miss // k + (i < miss % k)
        b = bypass // k + (i < bypass % k)
        o = None if origin is None else origin // k + (i < origin % k)
        out.append(Access(ts, path, size, h + m + b, "read", server, "", "", site, h, m, b, observed_hit=verdict,
                          observed_origin_bytes=o, duration_us=duration))
    return out


def _duration(attach, detach) -> int | None:
    """How long the file was attached, µs (whole seconds apart): both epoch-second integers in
    order, else not known (simcore/src/gstream.rs `attach_duration`, the same rule)."""
    if type(attach) is int and type(detach) is int and 0 < attach <= detach < _SECONDS_BELOW:
        return (detach - attach) * 1_000_000
    return None


def cache_record(rec: dict, ctx: ParseContext, keys: tuple[str, ...]) -> Access | Reject | list[Access]:
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
    host = rec.get("host")
    st = _stream(ctx)
    server = host if type(host) is str and host else st.host or ctx.server
    if served == 0:
        _accesses(ctx, server, path, rec.get("access_cnt"))
        return skip("cache access that served 0 bytes")
    when = rec.get(k_attach)
    if when is None or when == 0:
        when = rec.get(k_detach)
        ts = epoch_us(when, k_detach)
    else:
        ts = epoch_us(when, k_attach)
    verdict = _verdict(rec.get("remotes"), rec.get("b_todisk"), rec.get("b_prefetch"), miss, bypass)
    origin = _origin(rec.get("b_todisk"), bypass)
    site = rec.get("site")
    if type(site) is not str or not site:
        site = st.site
    k = _accesses(ctx, server, path, rec.get("access_cnt"))
    duration = _duration(rec.get(k_attach), rec.get(k_detach))
    if k > 1:
        return _split(k, ts, path, size, hit, miss, bypass, server, site, verdict, origin, duration)
    return Access(ts, path, size, served, "read", server, "", "", site, hit, miss, bypass, observed_hit=verdict,
                  observed_origin_bytes=origin, duration_us=duration)


#: the g-stream's key names, for cache_record(rec, ctx, GSTREAM_KEYS) on a decoded record
GSTREAM_KEYS = _KEYS = ("lfn", "size", "b_hit", "b_miss", "b_bypass", "attach_t", "detach_t")


def _parse_dict(line: str, ctx: ParseContext) -> Access | Reject | list[Access]:
    rec = json_object(line, _loads)
    event = rec.get("event")
    if event == "file_close" or (event is None and "lfn" in rec and "b_hit" in rec):
        return cache_record(rec, ctx, _KEYS)
    if rec.get("code") in ("g", "=") or "hostID" in rec:
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
    remotes: Any = _UNSET
    access_cnt: Any = _UNSET
    b_todisk: Any = _UNSET
    b_prefetch: Any = _UNSET
    code: Any = _UNSET
    src: Any = _UNSET
    hostID: Any = _UNSET  # noqa: N815 - the record's key
    siteID: Any = _UNSET  # noqa: N815


_decode = msgspec.json.Decoder(_Record).decode
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def _present(value: Any) -> Any:
    return None if value is _UNSET else value


def _close(r: _Record, ctx: ParseContext) -> Access | Reject | list[Access]:
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
    host = r.host
    st = _stream(ctx)
    server = host if type(host) is str and host else st.host or ctx.server
    if served == 0:
        _accesses(ctx, server, path, r.access_cnt)
        return skip("cache access that served 0 bytes")
    when = r.attach_t
    if type(when) is int and 0 < when < _SECONDS_BELOW:  # epoch seconds
        ts = when * 1_000_000
    elif when is _UNSET or when is None or when == 0:
        ts = epoch_us(_present(r.detach_t), "detach_t")
    else:
        ts = epoch_us(when, "attach_t")
    verdict = _verdict(r.remotes, r.b_todisk, r.b_prefetch, miss, bypass)
    origin = _origin(r.b_todisk, bypass)
    site = r.site
    if type(site) is not str or not site:
        site = st.site
    k = _accesses(ctx, server, path, r.access_cnt)
    duration = _duration(r.attach_t, r.detach_t)
    if k > 1:
        return _split(k, ts, path, size, hit, miss, bypass, server, site, verdict, origin, duration)
    return Access(ts, path, size, served, "read", server, "", "", site, hit, miss, bypass, observed_hit=verdict,
                  observed_origin_bytes=origin, duration_us=duration)


_HEADER_BYTES = 24  # the binary g-stream header: code, pseq, plen, stod, tBeg, tEnd, sID
_PIECE = "g-stream binary header (a piece: its bytes hold a newline)"
_PENDING = HELD_PENDING  # header bytes seen on the held lines before (their newlines included)


def _binary_json(line: str, ctx: ParseContext) -> str | Reject:
    """The JSON after a raw binary g-stream header: a line is one only when a JSON record decodes
    at a brace within the header's 24 bytes. A relay keeping datagrams as lines splits a header
    whose bytes hold a newline: the pieces before the JSON are held (`Held`) until a line completes
    the header within its 24 bytes (they are skipped then) or does not (they are rejected, as this
    line is). Lines decoded with errors replaced: a header char stands for one byte or more, so the
    JSON starts at a brace within the first 25 chars (tried in order: header bytes may hold a brace too)."""
    seen = ctx.state.pop(_PENDING, 0)
    room = _HEADER_BYTES - seen  # header bytes that can still be on this line
    at = line.find("{", 0, room + 1)
    while at >= 0:
        try:
            _decode(line[at:])
        except _DECODE_ERRORS:
            at = line.find("{", at + 1, room + 1)
            continue
        if seen:
            ctx.state[HELD_VERDICT] = ""
        return line[at:]
    if seen + len(line) + 1 <= _HEADER_BYTES:  # its newline is a header byte too
        ctx.state[_PENDING] = seen + len(line) + 1
        return Held(_PIECE)
    if seen:
        ctx.state[HELD_VERDICT] = (f"not a g-stream record: a line starting with 'g', taken for a binary header "
                                   f"cut by a newline, but no JSON record followed within its {_HEADER_BYTES} bytes")
        raise BadRecord("not a g-stream record: neither a JSON record nor the rest of the binary header begun "
                        f"on the line(s) before (no JSON record within its {_HEADER_BYTES} bytes)")
    raise BadRecord(f"not a g-stream record: a line starting with 'g' but no JSON record within its first "
                    f"{_HEADER_BYTES} bytes (a binary packet header is followed by one)")


def _parse(line: str, ctx: ParseContext) -> Access | Reject | list[Access]:
    if line[:1] == "g" or _PENDING in ctx.state:
        line = _binary_json(line, ctx)  # a raw datagram: binary header, then JSON
        if type(line) is Held:
            return line
    try:
        r = _decode(line)
    except _DECODE_ERRORS:
        return _parse_dict(line, ctx)  # not a JSON object (or a damaged one): the dict parse names why
    event = r.event
    if event == "file_close" or ((event is _UNSET or event is None) and r.lfn is not _UNSET
                                 and r.b_hit is not _UNSET):
        return _close(r, ctx)
    if r.code == "g" or r.code == "=" or r.hostID is not _UNSET:
        return _header({k: v for k, v in (("code", r.code), ("src", r.src), ("hostID", r.hostID),
                                          ("siteID", r.siteID)) if v is not _UNSET}, ctx)
    if event is _UNSET or event is None:
        raise BadRecord("field event: missing (not a g-stream record)")
    return skip(f"g-stream event {text(event, 'event')[:40]!r} (not a file close)")


# The same parse and the Enricher, compiled (simcore/src/gstream.rs), over lists of lines straight
# into event columns: it is given the compiled tier rules, the cache-group map, the sites' VOs and
# the stream's GstreamState when it is made and never calls back; it takes the file closes and
# headers it can decide exactly as _parse and the Enricher do and stops at the rest (the pipeline
# parses that line here, and pushes its event into the columns); tests/python/unit/ingest/test_gstream_fast.py
# compares both paths.


def _columns(ctx: ParseContext, enrich: Any) -> Any:
    """A compiled column builder for this stream (None: the Python path)."""
    if enrich.source != NAME or enrich.path_tiers is None:
        return None
    groups = enrich.cache_groups
    overrides = [(o.server, o.site, o.group) for o in groups.overrides]
    if any("[" in glob for o in overrides for glob in o[:2]):
        return None  # fnmatch's [...] sets stay Python's
    return GstreamColumns(enrich.source, enrich.origin, enrich.site, enrich.site_override, ctx.server,
                          enrich.site_vo, enrich.path_tiers, (overrides, groups.mode, groups.region), _stream(ctx))


FORMAT = Format(NAME, _parse, __doc__ or "", prepare=_stream, columns=_columns)
