"""rucio-trace: Rucio traces (as sent to /traces/ by pilots and `rucio download`, and as stored
in the ATLAS rucio-traces index), one JSON object per line.

* eventType get / get_sm / get_sm_a / sm_get / sm_get_a / download / touch with clientState DONE
  or FOUND_ROOT (direct I/O, stateReason direct_access) -> read of the whole file (a trace
  does not say how much of the file a job read); put_sm / put_sm_a / upload / put_es with
  DONE -> write.
* Skipped: other clientStates (ALREADY_DONE and FOUND_IN_PCACHE moved no data; FAILED,
  FILE_NOT_FOUND, ... failed), other eventTypes (logs, event service, sfo2eos ...).
* path: the trace's url (turl) if any, else the DID: the canonical rucio path for ATLAS scopes
  (/atlas/rucio/<scope>/<h1>/<h2>/<name>), the LFN itself for CMS (scope cms, /store/...).
* site: remoteSite (the RSE the file came from; localSite for uploads); server: the host of url;
  client: hostname, else ip; ts: timeStart (s), else transferStart, traceTimeentryUnix, timeEnd.
  The older index names (time_start, site, event) are accepted too.
Records without filesize are rejected: a cache cannot be simulated without it; a field of the
wrong JSON type is rejected with its name.
"""

from __future__ import annotations

from typing import Union

import msgspec

from cachescope.tiers import rucio_path
from ingest.formats._base import Access, BadRecord, Format, ParseContext, Reject, decode_struct, epoch_us, host_of_url, skip, uint

NAME = "rucio-trace"

READ_EVENTS = frozenset({"get", "get_sm", "get_sm_a", "sm_get", "sm_get_a", "download", "touch"})
WRITE_EVENTS = frozenset({"put_sm", "put_sm_a", "upload", "put_es"})
READ_STATES = frozenset({"DONE", "FOUND_ROOT"})

Number = Union[int, float, str, None]
Text = Union[str, None]


class _Trace(msgspec.Struct):
    eventType: Text = None
    event: Text = None  # old ATLAS 'traces' index
    clientState: Text = None
    filesize: Number = None
    filename: Text = None
    name: Text = None
    scope: Text = None
    url: Text = None
    timeStart: Number = None
    time_start: Number = None
    transferStart: Number = None
    traceTimeentryUnix: Number = None
    timeEnd: Number = None
    time_end: Number = None
    transferEnd: Number = None
    localSite: Text = None
    remoteSite: Text = None
    site: Text = None
    hostname: Text = None
    ip: Text = None
    traceIp: Text = None
    vo: Text = None


_decoder = msgspec.json.Decoder(_Trace)
_TIME_FIELDS = ("timeStart", "time_start", "transferStart", "traceTimeentryUnix", "timeEnd", "time_end", "transferEnd")


def _ts(rec: _Trace) -> int:
    for key in _TIME_FIELDS:
        value = getattr(rec, key)
        if value is not None and value != 0 and value != "":
            return epoch_us(value, key)
    raise BadRecord("field timeStart: missing (and no other time field)")


def _path(rec: _Trace) -> str:
    url = rec.url
    if url and "://" in url:
        return url
    name = rec.filename or rec.name
    if not name:
        raise BadRecord("field filename: missing or empty")
    scope = rec.scope
    if name.startswith("/") or not scope or scope == "cms":
        return name
    return rucio_path(scope, name)


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    rec = decode_struct(_decoder, line)
    event = rec.eventType if rec.eventType is not None else rec.event
    if event is None:
        raise BadRecord("field eventType: missing")
    state = rec.clientState
    if state is None and rec.eventType is None and rec.event is not None:
        state = "DONE"  # the old index kept successful traces only
    if event in READ_EVENTS:
        op = "read"
    elif event in WRITE_EVENTS:
        op = "write"
    else:
        return skip(f"eventType {event[:40]!r} is not a data read or write")
    if state not in READ_STATES or (op == "write" and state != "DONE"):
        return skip(f"clientState {(state or 'missing')[:40]} (no successful transfer)")
    if rec.filesize is None:
        raise BadRecord("field filesize: missing (a cache cannot be simulated without it)")
    size = uint(rec.filesize, "filesize")
    path = _path(rec)
    ts = _ts(rec)
    server = host_of_url(rec.url) if rec.url else ""
    site = (rec.localSite if op == "write" else rec.remoteSite) or rec.site or ""
    client = rec.hostname or rec.ip or rec.traceIp or ""
    vo = rec.vo or ("cms" if rec.scope == "cms" else "")
    return Access(ts, path, size, size, op, server or ctx.server, client, vo, site)


FORMAT = Format(NAME, _parse, __doc__ or "")
