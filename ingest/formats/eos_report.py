"""eos-report: EOS report log lines (`/var/eos/report/YYYY/MM/YYYYMMDD.eosreport`),
`key=value&key=value...` as written by the FST (fst/XrdFstOfsFile.cc MakeReportEnv) and the MGM;
also the CERN MONIT envelopes `{"data": "\\"log=...\\""}` / `{"data": {"raw": "log=..."}}`.

* FST open/close records (path, ots/otms, rb, rvb_sum, wb, nwc, osize, csize):
  written (wb > 0 or nwc > 0) -> write, size = csize, bytes = wb; else read bytes
  rb + rvb_sum (single and vector reads are counted apart) > 0 -> read, size = osize (csize if
  osize is 0); else skipped (open without data). ts = ots + otms; server = host; client = the
  host in td (`user.pid:fd@host`); vo hint = sec.vorg.
* MGM removals (sec.app rm / recycle; fid, dc_ts) -> delete. They carry no path: the path is the
  one an earlier record of the stream gave for that fid, else the line is skipped.
* FST deletion records (sec.app deletion): skipped, one replica removed from one filesystem.
"""

from __future__ import annotations

import re
from operator import methodcaller

import orjson

from ingest.formats._base import Access, BadRecord, Format, ParseContext, Reject, json_object, skip, uint

NAME = "eos-report"
_split_eq = methodcaller("split", "=", 1)
_loads = orjson.loads


def parse_kv(line: str) -> dict[str, str]:
    parts = line.split("&")
    try:
        return dict(map(_split_eq, parts))
    except ValueError:  # a piece without '=': keep the others
        out = {}
        for part in parts:
            key, sep, value = part.partition("=")
            if sep:
                out[key] = value
        return out


def _num(kv: dict[str, str], key: str, default: int | None = None) -> int:
    value = kv.get(key)
    if value is None or value == "":
        if default is None:
            raise BadRecord(f"field {key}: missing")
        return default
    if value.isdigit() and value.isascii():
        return int(value)
    return uint(value, key)


def _time(kv: dict[str, str], sec: str, sub: str, scale: int) -> int:
    seconds = _num(kv, sec)
    if seconds == 0:
        raise BadRecord(f"field {sec}: zero")
    return seconds * 1_000_000 + _num(kv, sub, 0) * scale


def _unwrap(line: str) -> str:
    rec = json_object(line, _loads)
    data = rec.get("data")
    if type(data) is str:
        return data.strip().strip('"')
    if type(data) is dict and type(data.get("raw")) is str:
        return data["raw"]
    raise BadRecord("MONIT envelope without a data string or data.raw")


# The FST open/close record in the key order every EOS release since 2018 writes (unknown keys
# skipped): one regex match is three times faster than splitting the ~60 pairs. Lines it does
# not match (older order, removals, damaged lines) take the general path.
def _skip_to(key: str) -> str:
    # fields up to `key`; possessive, so a line that does not match fails without backtracking
    return r"(?:&(?!" + key + r"=)[^&]*+)*+"


_FST = re.compile(
    r"log=[^&]*&path=([^&]+)" + _skip_to("td") + r"&td=([^&]*)&host=([^&]*)" + _skip_to("fid")
    + r"&fid=(\d+)" + _skip_to("ots") + r"&ots=(\d+)&otms=(\d+)" + _skip_to("nwc")
    + r"&nwc=(\d+)&rb=(\d+)" + _skip_to("rvb_sum") + r"&rvb_sum=(\d+)" + _skip_to("wb") + r"&wb=(\d+)"
    + _skip_to("osize") + r"&osize=(\d+)&csize=(\d+)" + _skip_to(r"sec\.vorg") + r"&sec\.vorg=([^&]*)(?=&)"
)
#: every FST and MGM record ends with the sec.* fields: a line without sec.app was cut short
_LAST_KEY = "sec.app"

_FID_MEMO_LIMIT = 1_000_000


def _remember_fid(ctx: ParseContext, fid: str, path: str) -> None:
    fids = ctx.state.get("eos_fids")
    if fids is None or len(fids) >= _FID_MEMO_LIMIT:
        fids = ctx.state["eos_fids"] = {}
    fids[fid] = path


def _fst(m: re.Match, ctx: ParseContext) -> Access | Reject:
    path, td, host, fid, ots, otms, nwc, rb, rvb, wb, osize, csize, vorg = m.groups()
    _remember_fid(ctx, fid, path)
    if ots == "0":
        raise BadRecord("field ots: zero")
    ts = int(ots) * 1_000_000 + int(otms) * 1000
    at = td.rfind("@")
    client = td[at + 1 :] if at >= 0 else ""
    server = host or ctx.server
    written = int(wb)
    if written or nwc != "0":
        size = int(csize)
        return Access(ts, path, size if size >= written else written, written, "write", server, client, vorg.lower())
    read = int(rb) + int(rvb)
    if read == 0:
        return skip("open without data (rb and wb are 0)")
    return Access(ts, path, int(osize) or int(csize), read, "read", server, client, vorg.lower())


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    if line[:1] == "{":
        line = _unwrap(line)
    m = _FST.match(line)
    if m is not None:
        return _fst(m, ctx)
    kv = parse_kv(line.strip())
    if _LAST_KEY not in kv and "log" in kv:
        raise BadRecord("record cut short: no sec.app field (EOS ends every record with the sec.* fields)")
    app = kv.get("sec.app", "")
    path = kv.get("path")
    if path is not None and "ots" in kv:
        if not path:
            raise BadRecord("field path: empty")
        fid = kv.get("fid")
        if fid:
            _remember_fid(ctx, fid, path)
        ts = _time(kv, "ots", "otms", 1000)
        td = kv.get("td", "")
        client = td.rsplit("@", 1)[1] if "@" in td else ""
        server = kv.get("host", "") or ctx.server
        vo = kv.get("sec.vorg", "").lower()
        written = _num(kv, "wb")  # required: a record without its byte counts is no 0-byte access
        if written > 0 or _num(kv, "nwc", 0) > 0:
            size = _num(kv, "csize")
            if written > size:
                size = written
            return Access(ts, path, size, written, "write", server, client, vo)
        read = _num(kv, "rb") + _num(kv, "rvb_sum", 0)
        if read == 0:
            return skip("open without data (rb and wb are 0)")
        size = _num(kv, "osize") or _num(kv, "csize")
        return Access(ts, path, size, read, "read", server, client, vo)
    if app == "deletion":
        return skip("FST replica deletion (one filesystem; the file may live on)")
    if app in ("rm", "recycle") or "dc_ts" in kv:
        fid = kv.get("fid")
        if not fid:
            raise BadRecord("field fid: missing from a removal record")
        known = (ctx.state.get("eos_fids") or {}).get(fid)
        if known is None:
            return skip(f"removal of fid {fid[:24]} whose path was never seen in this stream")
        if kv.get("dc_ts"):
            ts = _time(kv, "dc_ts", "dc_tns", 0) + _num(kv, "dc_tns", 0) // 1000
        else:
            ts = _time(kv, "dm_ts", "dm_tns", 0) + _num(kv, "dm_tns", 0) // 1000
        return Access(ts, known, 0, 0, "delete", "")
    if "log" not in kv:
        raise BadRecord("not an EOS report record (no log= field)")
    raise BadRecord("EOS report record without path/ots and not a removal")


FORMAT = Format(NAME, _parse, __doc__ or "")
