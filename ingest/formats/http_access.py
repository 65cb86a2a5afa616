"""http-access: HTTP access logs of grid storage, two families told apart per line:

* Apache httpd access logs as written by DPM / lcgdm-dav (and any Apache-fronted storage):
  the LogFormat is configurable (`ingest.http_access.log_format`); by default combined, then
  common (`%h %l %u %t "%r" %>s %b`, DPM's ssl_access_log). A format needs %t, %r (or %m and
  %U) and %>s: DPM's ssl_request_log (`%t %h %{SSL_PROTOCOL}x %{SSL_CIPHER}x "%r" %b`) has no
  status, so whole, partial and failed reads cannot be told apart; use ssl_access_log.
  GET 200 -> whole-file read (size = bytes = %b; the size is remembered for the path);
  GET 206 -> partial read, size = the size remembered from an earlier 200 or PUT of the path
  in this stream, else skipped; PUT 2xx -> write when the format logs the request body size
  (%I), else skipped; DELETE 2xx -> delete. Skipped: 3xx (redirects to disk servers), 4xx/5xx,
  other methods (HEAD, PROPFIND, COPY, ...), reads of 0 bytes. server = %v if logged, else
  --server; client = %h / %a; ts = %t (with its zone).
* dCache WebDAV door access logs (NetLogger `level=... ts=... event=org.dcache.webdav.request
  request.method=... request.url=... response.code=...`): these carry no byte counts (dCache's
  AbstractLoggingHandler logs none; the billing transfer record has them), so only DELETE 2xx
  -> delete; everything else is skipped. Other NetLogger events (xrootd door) are skipped.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from urllib.parse import unquote

from cachescope.errors import UsageError
from ingest.formats._base import Access, BadRecord, Format, ParseContext, Reject, iso_us, skip

NAME = "http-access"

COMMON = '%h %l %u %t "%r" %>s %b'
COMBINED = '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"'
DEFAULT_LOG_FORMATS = (COMBINED, COMMON)

_DIRECTIVE = re.compile(r"%(?:[<>]?)(?:\{([^}]*)\})?([a-zA-Z%])")
_NAMED = {
    "h": r"(?P<h>\S+)",
    "a": r"(?P<a>\S+)",
    "t": r"\[(?P<t>[^\]]+)\]",
    "r": r'(?P<r>[^"\\]*(?:\\.[^"\\]*)*)',  # unrolled: one class scan, not one alternation per char
    "s": r"(?P<s>\d{3})",
    "b": r"(?P<b>-|\d+)",
    "B": r"(?P<b>\d+)",
    "I": r"(?P<I>-|\d+)",
    "U": r"(?P<U>\S+)",
    "m": r"(?P<m>[A-Z]+)",
    "v": r"(?P<v>\S+)",
    "V": r"(?P<v>\S+)",
}


class LogFormatError(UsageError, ValueError):
    """A LogFormat string (configuration) that cannot be parsed (exit 2)."""


def compile_log_format(fmt: str) -> re.Pattern[str]:
    parts = []
    pos = 0
    used: set[str] = set()
    in_quotes = False
    for m in _DIRECTIVE.finditer(fmt):
        literal = fmt[pos : m.start()]
        in_quotes ^= literal.count('"') % 2 == 1
        parts.append(re.escape(literal))
        letter = m.group(2)
        if letter == "%":
            parts.append("%")
        elif letter in _NAMED and m.group(1) is None:
            rx = _NAMED[letter]
            name = re.search(r"\?P<(\w+)>", rx).group(1)  # type: ignore[union-attr]
            if name in used:
                rx = re.sub(r"\(\?P<\w+>", "(?:", rx)
            used.add(name)
            parts.append(rx)
        else:
            parts.append(r'[^"\\]*(?:\\.[^"\\]*)*' if in_quotes else r"\S+")
        pos = m.end()
    tail = fmt[pos:]
    parts.append(re.escape(tail))
    if "t" not in used:
        raise LogFormatError(f"LogFormat {fmt!r} has no %t (time)")
    if "r" not in used and not {"m", "U"} <= used:
        raise LogFormatError(f"LogFormat {fmt!r} has no %r (request line) nor %m and %U")
    if "s" not in used:
        raise LogFormatError(f"LogFormat {fmt!r} has no %>s (status)")
    return re.compile("".join(parts))


_DEFAULT_COMPILED = tuple(compile_log_format(f) for f in DEFAULT_LOG_FORMATS)

_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                        "Nov", "Dec"), 1)}
_CLF_TIME = re.compile(r"(\d{2})/([A-Z][a-z]{2})/(\d{4}):(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))? ([+-])(\d{2})(\d{2})")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _clf_us(value: str, ctx: ParseContext) -> int:
    cache = ctx.state.setdefault("http_hour_cache", {})
    m = _CLF_TIME.fullmatch(value)
    if m is None:
        raise BadRecord(f"field %t: not a [dd/Mon/yyyy:HH:MM:SS +zzzz] time: {value[:40]!r}")
    day, mon, year, hh, mi, ss, frac, sign, oh, om = m.groups()
    key = (year, mon, day, hh, sign, oh, om)
    base = cache.get(key)
    if base is None:
        month = _MONTHS.get(mon)
        if month is None:
            raise BadRecord(f"field %t: unknown month {mon!r}")
        try:
            dt = datetime(int(year), month, int(day), int(hh), tzinfo=timezone.utc)
        except ValueError as exc:
            raise BadRecord(f"field %t: {exc}") from None
        offset = (int(oh) * 60 + int(om)) * 60 * (1 if sign == "+" else -1)
        base = ((dt - _EPOCH).days * 86400 + (dt - _EPOCH).seconds - offset) * 1_000_000
        if len(cache) > 100_000:
            cache.clear()
        cache[key] = base
    if int(mi) > 59 or int(ss) > 60:
        raise BadRecord(f"field %t: time out of range: {value[:40]!r}")
    micro = int(frac.ljust(6, "0")) if frac else 0
    return base + (int(mi) * 60 + int(ss)) * 1_000_000 + micro


def _url_path(target: str) -> str:
    if "://" in target:
        rest = target.split("://", 1)[1]
        slash = rest.find("/")
        target = rest[slash:] if slash >= 0 else "/"
    q = target.find("?")
    if q >= 0:
        target = target[:q]
    if "%" in target:
        target = unquote(target, errors="replace")
    return target


def prepare(ctx: ParseContext) -> None:
    fmt = ctx.options.get("http_log_format")
    ctx.state["http_formats"] = (compile_log_format(fmt),) if fmt else _DEFAULT_COMPILED


# ---- dCache WebDAV door (NetLogger key=value) ----------------------------------------------

_NETLOGGER_PAIR = re.compile(r'([\w.\-]+)=("[^"\\]*(?:\\.[^"\\]*)*"?|\S*)')


def _netlogger(line: str, ctx: ParseContext) -> Access | Reject:
    kv = {k: v for k, v in _NETLOGGER_PAIR.findall(line)}
    event = kv.get("event", "")
    if event != "org.dcache.webdav.request":
        return skip(f"door event {event[:60]!r} (not a WebDAV request)")
    method = kv.get("request.method", "")
    code = kv.get("response.code", "")
    if not code.isdigit():
        raise BadRecord(f"field response.code: not a status code: {code[:20]!r}")
    if method == "DELETE":
        if not code.startswith("2"):
            return skip(f"failed DELETE ({code})")
        url = kv.get("request.url", "")
        if not url:
            raise BadRecord("field request.url: missing")
        stamp = kv.get("ts")
        if stamp is None:
            raise BadRecord("field ts: missing")
        remote = kv.get("socket.remote", "")
        client = remote[1:].split("]", 1)[0] if remote.startswith("[") else remote.rsplit(":", 1)[0]
        return Access(iso_us(stamp, "ts", ctx.tz), _url_path(url), 0, 0, "delete", "",
                      client)
    if method in ("GET", "PUT"):
        return skip(f"dCache door {method} {code}: door access logs carry no byte counts (billing has them)")
    if method in ("COPY", "POST"):
        return skip(f"dCache door {method} {code}: third-party copy request (billing has the transfer)")
    return skip(f"dCache door {method[:20] or '?'} {code}: not a data transfer")


# ---- Apache ---------------------------------------------------------------------------------


def _apache(line: str, ctx: ParseContext) -> Access | Reject:
    formats = ctx.state.get("http_formats") or _DEFAULT_COMPILED
    g = None
    for rx in formats:
        m = rx.fullmatch(line)
        if m is not None:
            g = m.groupdict()
            break
    if g is None:
        raise BadRecord("line matches no access-log format (check ingest.http_access.log_format)")
    request = g.get("r")
    if request is not None:
        pieces = request.split(" ")
        if len(pieces) < 2:
            raise BadRecord(f"field %r: not a request line: {request[:60]!r}")
        method, target = pieces[0], pieces[1]
    else:
        method, target = g.get("m") or "", g.get("U") or ""
    status = g.get("s") or ""
    if not status:
        raise BadRecord("field %>s: missing")
    path = _url_path(target)
    if not path:
        raise BadRecord("field %r: empty path")
    ts = _clf_us(g["t"], ctx)
    server = g.get("v") or ctx.server
    client = g.get("h") or g.get("a") or ""
    sent = g.get("b")
    nbytes = int(sent) if sent and sent != "-" else 0
    if method == "GET":
        if status == "200":
            if nbytes == 0:
                return skip("GET 200 of 0 bytes")
            ctx.remember(("http-size", path), nbytes)
            return Access(ts, path, nbytes, nbytes, "read", server, client)
        if status == "206":
            size = ctx.memo.get(("http-size", path))
            if size is None:
                return skip("partial GET (206) of a file whose size this log never showed")
            if nbytes == 0:
                return skip("GET 206 of 0 bytes")
            return Access(ts, path, size, nbytes, "read", server, client)
    elif method == "PUT" and status[:1] == "2":
        received = g.get("I")
        if received is None or received == "-":
            return skip("PUT: the log format has no %I, so the uploaded size is unknown")
        size = int(received)
        ctx.remember(("http-size", path), size)
        return Access(ts, path, size, size, "write", server, client)
    elif method == "DELETE" and status[:1] == "2":
        return Access(ts, path, 0, 0, "delete", "", client)
    if status[:1] == "3":
        return skip(f"{method[:20]} {status}: redirect")
    if status[:1] in ("4", "5"):
        return skip(f"{method[:20]} {status}: failed request")
    return skip(f"{method[:20]} {status}: not a data transfer")


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    if line.startswith("level="):
        return _netlogger(line, ctx)
    return _apache(line, ctx)


FORMAT = Format(NAME, _parse, __doc__ or "", prepare)
