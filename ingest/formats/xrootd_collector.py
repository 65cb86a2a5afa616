"""xrootd-collector: per-transfer JSON records built from XRootD's detailed monitoring streams,
one object per line, in the three shapes that exist:

* WLCG GenericFileMonitoring (xrootd-monitoring-collector wlcg_converter; CMS AAA on MONIT):
  file_lfn, file_size, read_bytes[_at_close], write_bytes, start_time, end_time, server_host +
  server_domain, client_host + client_domain, site_name, vo. A MONIT envelope
  `{"data": {...}, "metadata": {...}}` is unwrapped.
* OSG collector records (collector/correlator.go CollectorRecord): filename, filesize, read,
  readv, write, start_time, end_time, server_hostname, host / user_domain, site, vo.
* Cache events of the same collector (wlcg_converter TransformCacheEvent): file_path, size,
  bytes_hit_cache, bytes_miss_cache, bytes_bypass_cache, attach_time, detach_time -> a read with
  observed_* bytes, as for xrootd-gstream.

Transfers: write bytes > 0 -> write (the file changed; bytes = written, size = the larger of
size and written); else read bytes > 0 -> read (bytes = read_bytes_at_close or read_bytes for
WLCG records, read + readv for OSG records); neither -> skipped (open without data). Raw
shoveler packets (`{"data": <base64>, "remote": ...}`) are skipped: the collector decodes them.
ts = start_time (s or ms, told apart by magnitude), else end_time, else @timestamp. Records
without a file size are rejected: a cache cannot be simulated without it.
"""

from __future__ import annotations

import orjson

from ingest.formats._base import Access, BadRecord, Format, ParseContext, Reject, epoch_us, iso_us, json_object, opt_text, skip, uint
from ingest.formats.xrootd_gstream import cache_record

NAME = "xrootd-collector"
_loads = orjson.loads
_CACHE_KEYS = ("file_path", "size", "bytes_hit_cache", "bytes_miss_cache", "bytes_bypass_cache", "attach_time",
               "detach_time")


def _join(host: object, domain: object) -> str:
    h = opt_text(host)
    d = opt_text(domain)
    if h and d and "." not in h:
        return f"{h}.{d}"
    return h or d


def _when(rec: dict, ctx: ParseContext) -> int:
    for key in ("start_time", "end_time"):
        value = rec.get(key)
        if value is not None and value != 0 and value != "":
            return epoch_us(value, key)
    stamp = rec.get("@timestamp")
    if stamp is not None:
        return iso_us(stamp, "@timestamp", ctx.tz)
    raise BadRecord("field start_time: missing (and no end_time or @timestamp)")


def _size(rec: dict, *keys: str) -> int:
    for key in keys:
        if rec.get(key) is not None:
            return uint(rec[key], key)
    raise BadRecord(f"field {keys[0]}: missing (a cache cannot be simulated without the file size)")


def _transfer(rec: dict, ctx: ParseContext, wlcg: bool) -> Access | Reject:
    if wlcg:
        path = rec.get("file_lfn")
        size = _size(rec, "file_size")
        if "read_bytes" not in rec and "read_bytes_at_close" not in rec:
            raise BadRecord("field read_bytes: missing (no byte counts: not an access of 0 bytes)")
        at_close = rec.get("read_bytes_at_close")
        read = uint(at_close, "read_bytes_at_close") if at_close else 0
        if read == 0:
            read = uint(rec.get("read_bytes", 0), "read_bytes")
        written = rec.get("write_bytes_at_close") or rec.get("write_bytes") or 0
        written = uint(written, "write_bytes")
        server = _join(rec.get("server_host"), rec.get("server_domain"))
        client = _join(rec.get("client_host"), rec.get("client_domain"))
        site = opt_text(rec.get("site_name"))
    else:
        path = rec.get("filename")
        size = _size(rec, "filesize", "file_size")
        if "read" not in rec and "readv" not in rec and "write" not in rec:
            raise BadRecord("fields read and write: missing (no byte counts: not an access of 0 bytes)")
        read = uint(rec.get("read", 0), "read") + uint(rec.get("readv", 0), "readv")
        written = uint(rec.get("write", 0), "write")
        server = opt_text(rec.get("server_hostname")) or opt_text(rec.get("server"))
        client = opt_text(rec.get("host")) or opt_text(rec.get("user_domain"))
        site = opt_text(rec.get("site"))
    if type(path) is not str or not path:
        raise BadRecord(f"field {'file_lfn' if wlcg else 'filename'}: missing or not a string")
    vo = opt_text(rec.get("vo")) or opt_text(rec.get("experiment"))
    ts = _when(rec, ctx)
    if written > 0:
        return Access(ts, path, size if size >= written else written, written, "write", server or ctx.server,
                      client, vo.lower(), site)
    if read == 0:
        return skip("transfer without data (open and close only)")
    return Access(ts, path, size, read, "read", server or ctx.server, client, vo.lower(),
                  site)


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    rec = json_object(line, _loads)
    data = rec.get("data")
    if type(data) is dict and "metadata" in rec:
        rec = data
    elif type(data) is str and "remote" in rec:
        return skip("raw monitoring packet from the shoveler (the collector turns packets into records)")
    if "file_lfn" in rec:
        return _transfer(rec, ctx, True)
    if "filename" in rec:
        return _transfer(rec, ctx, False)
    if "bytes_hit_cache" in rec or "file_path" in rec:
        return cache_record(rec, ctx, _CACHE_KEYS)
    raise BadRecord("no file_lfn, filename or file_path field (not a collector transfer record)")


FORMAT = Format(NAME, _parse, __doc__ or "")
