"""dcache-billing: dCache text billing files (`billing-YYYY.MM.DD`, one line per message).

Lines are matched against the billing.text.format.* templates: the defaults of dCache's
billing.properties (plus the pre-initiator mover format of older releases), after any custom
templates a site configures (`ingest.dcache_billing.formats`, same StringTemplate syntax:
`$var$`, `$var.attr$`, `$if(x)$..$else$..$endif$`, `$date;format="yyyy.MM.dd HH:mm:ss"$`).

What each message becomes:
* mover-info `transfer` (pool): `$created$` true -> write, false -> read; bytes = `$transferred$`,
  file size = `$filesize$` (writes: the larger of the two); server = the pool (cell name without
  `@domain`); client = the host in `{$protocol$}`; ts = `$date$`, the record's time (dCache
  writes it when the mover ends; the start is not logged, so none is made up); duration_us =
  `$connectionTime$` (ms, how long the mover ran), when the template has it.
  Skipped: rc != 0 (failed transfer), initiator `pool:...` (pool-to-pool copy, not a client
  access), reads of 0 bytes (open without data).
* door-request `request`: skipped, the pool's transfer record carries the bytes (the line is
  used to learn pnfsid -> path). door-request `remove`: delete (rc != 0: skipped).
* remove-file-info: door -> delete; pool -> skipped (a replica cleaned from one pool, the file
  lives on; the namespace removal is the door's record).
* pool-hit, storage-info (tape store/restore), warning: skipped, they are not client accesses.
Paths `Unknown` are resolved through pnfsids seen earlier in the stream; otherwise the path is
`pnfsid:<PNFSID>` (stable, tier UNKNOWN). Deletes of an unresolvable path are skipped.

Dates: `MM.dd HH:mm:ss` on the site's clock (config `sites.<site>.timezone`); the year comes from
the file name (`billing-2024.01.31`), else `ingest.year` / `--year`, else the file's mtime year.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from operator import itemgetter
from typing import Callable

from cachescope.errors import UsageError
from cachescope.specs import BillingFast
from ingest.formats._base import MEMO_LIMIT, Access, BadRecord, Format, ParseContext, Reject, skip

NAME = "dcache-billing"

# billing.properties @ dCache 77340d66 (docs/TheBook; skel/share/defaults/billing.properties)
_STORAGE = "$if(storage)$$$$storage.storageClass$@$storage.hsm$$$$else$<Unknown>$endif$"
DEFAULT_FORMATS: dict[str, str] = {
    "mover-info-message": (
        "$date$ [$cellType$:$cellName.cell$:$type$] [$pnfsid$,$filesize$] [$path$] " + _STORAGE + " "
        '$transferred$ $connectionTime$ $created$ {$protocol$} [$initiator$] {$rc$:"$message$"}'
    ),
    "remove-file-info-message": (
        "$date$ [$cellType$:$cellName$:$type$] [$pnfsid$,$filesize$] [$path$] " + _STORAGE + ' {$rc$:"$message$"}'
    ),
    "door-request-info-message": (
        '$date$ [$cellType$:$cellName$:$type$] ["$owner$":$uid$:$gid$:$clientChain$] [$pnfsid$,$filesize$] '
        "[$path$] " + _STORAGE + ' $transactionTime$ $queuingTime$ {$rc$:"$message$"}'
    ),
    "storage-info-message": (
        "$date$ [$cellType$:$cellName$:$type$] [$pnfsid$,$filesize$] [$path$] " + _STORAGE + " "
        '$transferTime$ $queuingTime$ {$rc$:"$message$"}'
    ),
    "pool-hit-info-message": (
        "$date$ [$cellType$:$cellName.cell$:$type$] [$pnfsid$,$filesize$] [$path$] " + _STORAGE + " "
        '$cached$ {$protocol$} {$rc$:"$message$"}'
    ),
    "warning-pnfs-file-info-message": '$date$ [$cellType$:$cellName$:$type$] {$rc$:"$message$"}',
}
# releases before the initiator field was added to the mover line
LEGACY_FORMATS: dict[str, str] = {
    "mover-info-message": (
        "$date$ [$cellType$:$cellName$:$type$] [$pnfsid$,$filesize$] [$path$] " + _STORAGE + " "
        '$transferred$ $connectionTime$ $created$ {$protocol$} {$rc$:"$message$"}'
    ),
}
MESSAGE_KINDS = tuple(DEFAULT_FORMATS)

_VAR_RX = {
    "cellType": r"[^:\s\]]+",
    "cellName": r"[^:\s\]]+",
    "cellName.cell": r"[^:\s\]]+",
    "cellName.domain": r"[^:\s\]]+",
    "type": r"[A-Za-z-]+",
    "pnfsid": r"[0-9A-Fa-f]*",
    "filesize": r"-?\d+",
    "path": r".*?",
    "storage.storageClass": r"[^@\s]*",
    "storage.hsm": r"\S*",
    "transferred": r"-?\d+",
    "connectionTime": r"-?\d+",
    "transactionTime": r"-?\d+",
    "queuingTime": r"-?\d+",
    "transferTime": r"-?\d+",
    "created": r"true|false",
    "cached": r"true|false",
    "protocol": r"[^}]*",
    "initiator": r"[^\]]*",
    "rc": r"-?\d+",
    "message": r".*?",
    "owner": r'[^"]*',
    "uid": r"-?\d+",
    "gid": r"-?\d+",
    "clientChain": r"[^\]]*",
    "client": r"[^\]\s]*",
}
_DEFAULT_DATE = "MM.dd HH:mm:ss"
_DATE_LETTERS = {
    "yyyy": r"(?P<d_y>\d{4})",
    "yy": r"(?P<d_yy>\d{2})",
    "MM": r"(?P<d_mo>\d{2})",
    "dd": r"(?P<d_d>\d{2})",
    "HH": r"(?P<d_h>\d{2})",
    "mm": r"(?P<d_mi>\d{2})",
    "ss": r"(?P<d_s>\d{2})",
    "SSS": r"(?P<d_ms>\d{3})",
}
_DATE_TOKEN = re.compile(r"yyyy|yy|MM|dd|HH|mm|ss|SSS|'[^']*'|[A-Za-z]+|[^A-Za-z']+")


class FormatError(UsageError, ValueError):
    """A billing format or date pattern (configuration) that cannot be used (exit 2)."""


def _date_regex(pattern: str) -> str:
    out = []
    for tok in _DATE_TOKEN.findall(pattern):
        if tok in _DATE_LETTERS:
            if _DATE_LETTERS[tok] in out:
                raise FormatError(f"date format {pattern!r} repeats {tok}")
            out.append(_DATE_LETTERS[tok])
        elif tok.startswith("'"):
            out.append(re.escape(tok[1:-1]))
        elif tok[0].isalpha():
            raise FormatError(f"date format {pattern!r}: pattern letters {tok!r} are not supported")
        else:
            out.append(re.escape(tok))
    rx = "".join(out)
    for need in ("d_mo", "d_d", "d_h", "d_mi", "d_s"):
        if need not in rx:
            raise FormatError(f"date format {pattern!r} lacks a field ({need[2:]})")
    return rx


def _tokens(template: str) -> list[tuple[str, str]]:
    """('lit', text) and ('expr', inside) tokens of a $-delimited template."""
    out: list[tuple[str, str]] = []
    i = 0
    n = len(template)
    while i < n:
        j = template.find("$", i)
        if j < 0:
            out.append(("lit", template[i:]))
            break
        if j > i:
            out.append(("lit", template[i:j]))
        k = template.find("$", j + 1)
        if k < 0:
            raise FormatError(f"unbalanced '$' at offset {j} in {template!r}")
        out.append(("expr", template[j + 1 : k]))
        i = k + 1
    return out


# fields the parser reads; the others are matched without capturing (cheaper groupdict)
_CAPTURED = {"cellType", "cellName", "cellName.cell", "type", "pnfsid", "filesize", "path", "transferred",
             "created", "protocol", "initiator", "rc", "message", "clientChain", "connectionTime"}


def compile_template(template: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Regex matching the lines a billing.text.format template produces, and the regex of its
    $date$ text (the line regex captures the date whole; it is taken apart once per distinct date)."""
    used: set[str] = set()
    date_rx: re.Pattern[str] | None = None
    stack: list[list[list[str]]] = [[[]]]  # per open if: list of branches, each a list of parts

    for kind, value in _tokens(template):
        parts = stack[-1][-1]
        if kind == "lit":
            parts.append(re.escape(value))
            continue
        expr = value.strip()
        if expr == "":
            continue
        if expr.startswith("if(") and expr.endswith(")"):
            stack.append([[]])
        elif expr == "else":
            if len(stack) == 1:
                raise FormatError(f"$else$ without $if$ in {template!r}")
            stack[-1].append([])
        elif expr == "endif":
            if len(stack) == 1:
                raise FormatError(f"$endif$ without $if$ in {template!r}")
            branches = stack.pop()
            stack[-1][-1].append("(?:" + "|".join("".join(b) for b in branches) + ")")
        else:
            name, _, opts = expr.partition(";")
            name = name.strip()
            if name == "date":
                m = re.search(r'format\s*=\s*"([^"]*)"', opts)
                rx = _date_regex(m.group(1) if m else _DEFAULT_DATE)
                plain = re.sub(r"\(\?P<\w+>", "(?:", rx)
                if "date" in used:
                    rx = plain
                else:
                    date_rx = re.compile(rx)
                    rx = f"(?P<date>{plain})"
                used.add("date")
                parts.append(rx)
                continue
            if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
                raise FormatError(f"unsupported template expression ${expr}$ in {template!r}")
            group = name.replace(".", "__")
            rx = _VAR_RX.get(name, r".*?")
            if name not in _CAPTURED:
                parts.append(f"(?:{rx})")
            elif group in used:
                parts.append(f"(?:{rx})")
            else:
                used.add(group)
                parts.append(f"(?P<{group}>{rx})")
    if len(stack) != 1:
        raise FormatError(f"$if$ without $endif$ in {template!r}")
    if date_rx is None:
        raise FormatError(f"template has no $date$: {template!r}")
    return re.compile("".join(stack[0][0])), date_rx


# what a transfer line is read for, in this order (itemgetter over the match's groups)
_MOVER_FIELDS = ("date", "cellName__cell", "cellName", "pnfsid", "filesize", "path", "transferred", "created",
                 "protocol", "initiator", "rc", "message", "connectionTime")


@dataclass(frozen=True, slots=True)
class _Compiled:
    kind: str
    regex: re.Pattern[str]
    date: re.Pattern[str]
    fields: Callable[[tuple], tuple]  # groups (+ a trailing None for absent fields) -> _MOVER_FIELDS


def _compiled(kind: str, regex: re.Pattern[str], date: re.Pattern[str]) -> _Compiled:
    none = regex.groups  # index of the None appended to m.groups()
    picks = [regex.groupindex[name] - 1 if name in regex.groupindex else none for name in _MOVER_FIELDS]
    return _Compiled(kind, regex, date, itemgetter(*picks))


def compile_formats(custom: dict[str, str] | None = None) -> tuple[_Compiled, ...]:
    """Custom templates first, then the defaults, then legacy ones."""
    out: list[_Compiled] = []
    for key, template in (custom or {}).items():
        kind = key.removeprefix("billing.text.format.")
        if kind not in MESSAGE_KINDS:
            raise FormatError(f"unknown billing message {key!r}; expected one of {', '.join(MESSAGE_KINDS)}")
        out.append(_compiled(kind, *compile_template(template)))
    # most lines are transfers and door requests: try those first
    order = ("mover-info-message", "door-request-info-message", "remove-file-info-message",
             "pool-hit-info-message", "storage-info-message", "warning-pnfs-file-info-message")
    for kind in order:
        out.append(_compiled(kind, *compile_template(DEFAULT_FORMATS[kind])))
    for kind, template in LEGACY_FORMATS.items():
        out.append(_compiled(kind, *compile_template(template)))
    return tuple(out)


_DEFAULT_COMPILED = compile_formats()
_DEFAULT_DATE_RX = _DEFAULT_COMPILED[0].date

_PROTO_COLON = re.compile(r"^[A-Za-z][\w]*-[\d.]+:\[?(?P<host>[0-9A-Za-z:._-]+?)\]?:(?P<port>\d+)(?=$|:\D)")
_PROTO_SPACE = re.compile(r"^[A-Za-z][\w]*-[\d.]+ (?P<host>\S+) \d+")


def client_of_protocol(protocol: str) -> str:
    head, sep, rest = protocol.partition(":")
    if sep and rest.count(":") == 1 and "-" in head:  # Xrootd-5.0:host:port
        return rest.partition(":")[0]
    m = _PROTO_COLON.match(protocol)
    if m:
        return m.group("host")
    m = _PROTO_SPACE.match(protocol)
    return m.group("host") if m else ""


def _doors_first(formats: tuple[_Compiled, ...], ctx: ParseContext) -> tuple[_Compiled, ...]:
    ordered = tuple(sorted(formats, key=lambda f: f.kind != "door-request-info-message"))
    ctx.state["dcache_billing_doors_first"] = ordered
    return ordered


def prepare(ctx: ParseContext) -> None:
    custom = ctx.options.get("dcache_billing_formats")
    ctx.state["dcache_billing"] = compile_formats(custom) if custom else _DEFAULT_COMPILED


def _default_date_us(text: str, ctx: ParseContext) -> int:
    """'MM.dd HH:mm:ss' (the line regex checked the digits): per-minute cache, seconds added."""
    minutes = ctx.state.get("billing_minutes")
    if minutes is None:
        minutes = ctx.state["billing_minutes"] = {}
    key = text[:11]
    base = minutes.get(key)
    if base is None:
        if ctx.year is None:
            raise BadRecord("field date: no year (name the file billing-YYYY.MM.DD or pass --year)")
        month, day = int(text[0:2]), int(text[3:5])
        if not (1 <= month <= 12 and 1 <= day <= 31):
            raise BadRecord(f"field date: month {month} day {day} out of range")
        base = ctx.local_us(ctx.year, month, day, int(text[6:8]), int(text[9:11]), 0)
        if len(minutes) >= 100_000:
            minutes.clear()
        minutes[key] = base
    second = int(text[12:14])
    if second > 60:
        raise BadRecord(f"field date: second {second} out of range")
    return base + second * 1_000_000


def _ts(text: str | None, date_rx: re.Pattern[str], ctx: ParseContext) -> int:
    """UTC microseconds of the $date$ text; many lines share a second, so cache per date text."""
    cache = ctx.state.get("billing_dates")
    if cache is None:
        cache = ctx.state["billing_dates"] = {}
    us = cache.get(text)
    if us is not None:
        return us
    if date_rx is _DEFAULT_DATE_RX and text is not None and len(text) == 14:
        us = _default_date_us(text, ctx)
        if len(cache) >= 100_000:
            cache.clear()
        cache[text] = us
        return us
    m = date_rx.fullmatch(text or "")
    if m is None:
        raise BadRecord(f"field date: cannot read {text!r}")
    g = m.groupdict()
    if g.get("d_y"):
        year = int(g["d_y"])  # type: ignore[arg-type]
    elif g.get("d_yy"):
        year = 2000 + int(g["d_yy"])  # type: ignore[arg-type]
    elif ctx.year is not None:
        year = ctx.year
    else:
        raise BadRecord("field date: no year (name the file billing-YYYY.MM.DD or pass --year)")
    month, day = int(g["d_mo"]), int(g["d_d"])  # type: ignore[arg-type]
    if not (1 <= month <= 12 and 1 <= day <= 31):
        raise BadRecord(f"field date: month {month} day {day} out of range")
    ms = int(g["d_ms"]) * 1000 if g.get("d_ms") else 0
    us = ctx.local_us(year, month, day, int(g["d_h"]), int(g["d_mi"]), int(g["d_s"]), ms)  # type: ignore[arg-type]
    if len(cache) >= 100_000:
        cache.clear()
    cache[text] = us
    return us


def _resolve_path(path: str | None, pnfsid: str | None, ctx: ParseContext) -> str:
    if path and path != "Unknown":
        if pnfsid:
            ctx.remember(pnfsid, path)
        return path
    if pnfsid:
        known = ctx.memo.get(pnfsid)
        if known is not None:
            return known
        return f"pnfsid:{pnfsid}"
    return ""


def _path(g: dict[str, str | None], ctx: ParseContext) -> str:
    return _resolve_path(g.get("path"), g.get("pnfsid"), ctx)


def _mover(m: re.Match[str], fmt: _Compiled, ctx: ParseContext) -> Access | Reject:
    return _mover_of(fmt.fields(m.groups() + (None,)), fmt.date, ctx)


def _mover_of(fields: tuple, date_rx: re.Pattern[str], ctx: ParseContext) -> Access | Reject:
    """A transfer record from its _MOVER_FIELDS."""
    (date, cell_cell, cell_name, pnfsid, filesize, path, transferred, created, protocol, initiator, rc,
     message, connection) = fields
    if rc is not None and rc != "0":
        return skip(f"failed transfer (rc={rc}: {message or ''})")
    if initiator and initiator.startswith("pool:"):
        return skip(f"pool-to-pool copy (initiator {initiator})")
    if transferred is None or filesize is None or created is None:
        raise BadRecord("the billing format lacks $transferred$, $filesize$ or $created$")
    transferred = int(transferred)
    filesize = int(filesize)
    if transferred < 0 or filesize < 0:
        raise BadRecord(f"field transferred/filesize: negative ({transferred}, {filesize})")
    path = _resolve_path(path, pnfsid, ctx)
    if not path:
        raise BadRecord("field path: empty and no pnfsid")
    ts = _ts(date, date_rx, ctx)
    cell = cell_cell or cell_name or ""
    at = cell.find("@")
    server = cell[:at] if at >= 0 else cell
    client = client_of_protocol(protocol or "")
    duration = _duration_us(connection)
    if created == "true":
        return Access(ts, path, filesize if filesize >= transferred else transferred, transferred, "write", server,
                      client, duration_us=duration)
    if transferred == 0:
        return skip("zero-byte read (open without data)")
    return Access(ts, path, filesize, transferred, "read", server, client, duration_us=duration)


def _duration_us(connection: str | None) -> int | None:
    """The mover's connectionTime (ms: how long the transfer ran) in µs; not known when absent
    or negative (simcore/src/billing.rs, the same rule)."""
    if connection is None:
        return None
    ms = int(connection)
    return ms * 1000 if 0 <= ms <= (2**63 - 1) // 1000 else None


def _delete(g: dict[str, str | None], date_rx: re.Pattern[str], ctx: ParseContext,
            client: str = "") -> Access | Reject:
    rc = g.get("rc")
    if rc is not None and rc != "0":
        return skip(f"failed removal (rc={rc}: {g.get('message') or ''})")
    path = _path(g, ctx)
    if not path or path.startswith("pnfsid:"):
        return skip(f"removal of a file whose path was never seen (pnfsid {g.get('pnfsid') or '?'})")
    return Access(_ts(g["date"], date_rx, ctx), path, 0, 0, "delete", "", client)


_DOOR_REQUEST = skip("door request (the pool's transfer record carries the bytes)")


def _learn(m: re.Match[str], ctx: ParseContext) -> None:
    """pnfsid -> path, for later transfer records whose path is Unknown."""
    gi = m.re.groupindex
    if "pnfsid" in gi and "path" in gi:
        pnfsid, path = m.group("pnfsid", "path")
        if pnfsid and path and path != "Unknown":
            ctx.remember(pnfsid, path)


# ---------------------------------------------------------------------------------------------
# The compiled path (simcore/src/billing.rs), over a list of lines: transfer and door lines of the
# default templates (~all of a billing log), matched by hand, the same events, skip reasons and
# memo writes in line order as the templates give. It stops at a line it declines (other
# templates, numbers that leave i64, a date _ts rejects ...) before any effect of that line; the
# line goes through the templates here, then the scan resumes. The templates are the reference:
# tests/python/unit/ingest/test_dcache_billing_fast.py compares both on samples, generated, mutated and
# hypothesis lines. Custom templates (ingest.dcache_billing.formats) use the templates only.
_SCANNER = BillingFast()
_MOVER_DATE = next(f.date for f in _DEFAULT_COMPILED if f.kind == "mover-info-message")
_DOOR_DATE = next(f.date for f in _DEFAULT_COMPILED if f.kind == "door-request-info-message")
_ZERO_READ = skip("zero-byte read (open without data)")


def _block(lines: list[str], ctx: ParseContext) -> list | None:
    """What Format.parse gives for each line (None for blank ones), or None (custom templates: the
    templates line by line)."""
    if ctx.state.get("dcache_billing", _DEFAULT_COMPILED) is not _DEFAULT_COMPILED:
        return None
    dates = ctx.state.get("billing_dates")
    if dates is None:
        dates = ctx.state["billing_dates"] = {}
    out: list = []
    n = len(lines)
    i = 0
    scan = _SCANNER.scan
    memo = ctx.memo
    ts_mover = lambda text: _ts(text, _MOVER_DATE, ctx)  # noqa: E731
    ts_door = lambda text: _ts(text, _DOOR_DATE, ctx)  # noqa: E731
    in_python = 0
    while True:
        i = scan(lines, i, out, memo, MEMO_LIMIT, dates, ts_mover, ts_door, client_of_protocol, Access, skip,
                 _DOOR_REQUEST, _ZERO_READ)
        if i >= n:
            break
        line = lines[i].rstrip("\r\n")
        if not line or line.isspace():
            out.append(None)
        else:
            in_python += 1
            out.append(FORMAT.parse(line, ctx))
        i += 1
    ctx.state["dcache_billing_in_python"] = ctx.state.get("dcache_billing_in_python", 0) + in_python
    return out


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    """A line through the template regexes (the reference the compiled path must agree with)."""
    formats = ctx.state.get("dcache_billing") or _DEFAULT_COMPILED
    if ":request] " in line:  # door requests are half the lines: try their template first
        formats = ctx.state.get("dcache_billing_doors_first") or _doors_first(formats, ctx)
    for fmt in formats:
        m = fmt.regex.fullmatch(line)
        if m is None:
            continue
        kind = fmt.kind
        if kind == "mover-info-message":
            return _mover(m, fmt, ctx)
        gi = fmt.regex.groupindex
        mtype = (m.group("type") or "") if "type" in gi else ""
        if kind == "door-request-info-message":
            if mtype == "remove":
                g = m.groupdict()
                chain = g.get("clientChain") or ""
                return _delete(g, fmt.date, ctx, chain.split(",", 1)[0] if chain != "unknown" else "")
            _learn(m, ctx)
            if mtype == "request" or not mtype:
                return _DOOR_REQUEST
            return skip(f"door {mtype} (the pool's transfer record carries the bytes)")
        if kind == "remove-file-info-message":
            if "cellType" in gi and m.group("cellType") == "pool":
                return skip("pool replica removal (the namespace removal is the door's record)")
            return _delete(m.groupdict(), fmt.date, ctx)
        if kind == "pool-hit-info-message":
            _learn(m, ctx)
            return skip("pool hit info (the transfer record counts the access)")
        if kind == "storage-info-message":
            return skip(f"tape {mtype or 'store/restore'} (not a client access)")
        return skip(f"billing {mtype or 'warning'} message")
    raise BadRecord("line matches no billing format (check ingest.dcache_billing.formats)")


FORMAT = Format(NAME, _parse, __doc__ or "", prepare, _block)
