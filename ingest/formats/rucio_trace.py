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
Records without filesize are rejected: a cache cannot be simulated without it.
"""

from __future__ import annotations

import orjson

from cachescope.tiers import rucio_path
from ingest.formats._base import (
    Access,
    BadRecord,
    Format,
    ParseContext,
    Reject,
    epoch_us,
    host_of_url,
    json_object,
    opt_text,
    skip,
    uint,
)

NAME = "rucio-trace"
_loads = orjson.loads

READ_EVENTS = frozenset({"get", "get_sm", "get_sm_a", "sm_get", "sm_get_a", "download", "touch"})
WRITE_EVENTS = frozenset({"put_sm", "put_sm_a", "upload", "put_es"})
READ_STATES = frozenset({"DONE", "FOUND_ROOT"})
_TIME_KEYS = ("timeStart", "time_start", "transferStart", "traceTimeentryUnix", "timeEnd", "time_end", "transferEnd")


def _ts(rec: dict) -> int:
    for key in _TIME_KEYS:
        value = rec.get(key)
        if value is not None and value != 0 and value != "":
            return epoch_us(value, key)
    raise BadRecord("field timeStart: missing (and no other time field)")


def _path(rec: dict) -> str:
    url = rec.get("url")
    if type(url) is str and url and "://" in url:
        return url
    name = rec.get("filename") or rec.get("name")
    if type(name) is not str or not name:
        raise BadRecord("field filename: missing or not a string")
    scope = rec.get("scope")
    if name.startswith("/") or type(scope) is not str or not scope or scope == "cms":
        return name
    return rucio_path(scope, name)


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    rec = json_object(line, _loads)
    event = rec.get("eventType", rec.get("event"))
    if type(event) is not str:
        raise BadRecord("field eventType: missing or not a string")
    state = rec.get("clientState", "DONE" if "event" in rec and "eventType" not in rec else None)
    if event in READ_EVENTS:
        op = "read"
    elif event in WRITE_EVENTS:
        op = "write"
    else:
        return skip(f"eventType {event[:40]!r} is not a data read or write")
    if type(state) is not str or state not in READ_STATES or (op == "write" and state != "DONE"):
        return skip(f"clientState {opt_text(state)[:40] or 'missing'} (no successful transfer)")
    size = rec.get("filesize")
    if size is None:
        raise BadRecord("field filesize: missing (a cache cannot be simulated without it)")
    size = uint(size, "filesize")
    path = _path(rec)
    ts = _ts(rec)
    url = rec.get("url")
    server = host_of_url(url) if type(url) is str else ""
    site = opt_text(rec.get("localSite" if op == "write" else "remoteSite")) or opt_text(rec.get("site"))
    client = opt_text(rec.get("hostname")) or opt_text(rec.get("ip")) or opt_text(rec.get("traceIp"))
    vo = opt_text(rec.get("vo"))
    if not vo and rec.get("scope") == "cms":
        vo = "cms"
    return Access(ts, path, size, size, op, server or ctx.server, client, vo, site)


FORMAT = Format(NAME, _parse, __doc__ or "")
