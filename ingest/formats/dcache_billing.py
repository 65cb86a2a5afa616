"""dcache-billing: dCache text billing files (`billing-YYYY.MM.DD`, one line per message).

Lines are matched against the billing.text.format.* templates: the defaults of dCache's
billing.properties (plus the pre-initiator mover format of older releases), after any custom
templates a site configures (`ingest.dcache_billing.formats`, same StringTemplate syntax:
`$var$`, `$var.attr$`, `$if(x)$..$else$..$endif$`, `$date;format="yyyy.MM.dd HH:mm:ss"$`).

What each message becomes:
* mover-info `transfer` (pool): `$created$` true -> write, false -> read; bytes = `$transferred$`,
  file size = `$filesize$` (writes: the larger of the two); server = the pool (cell name without
  `@domain`); client = the host in `{$protocol$}`; ts = `$date$` minus `$connectionTime$` ms.
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

from ingest.formats._base import Access, BadRecord, Format, ParseContext, Reject, skip

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


class FormatError(ValueError):
    pass


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


def compile_template(template: str) -> re.Pattern[str]:
    """Regex matching the lines a billing.text.format template produces."""
    used: set[str] = set()
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
                if "date" in used:
                    rx = re.sub(r"\(\?P<\w+>", "(?:", rx)
                used.add("date")
                parts.append(rx)
                continue
            if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
                raise FormatError(f"unsupported template expression ${expr}$ in {template!r}")
            group = name.replace(".", "__")
            rx = _VAR_RX.get(name, r".*?")
            if group in used:
                parts.append(f"(?:{rx})")
            else:
                used.add(group)
                parts.append(f"(?P<{group}>{rx})")
    if len(stack) != 1:
        raise FormatError(f"$if$ without $endif$ in {template!r}")
    if "date" not in used:
        raise FormatError(f"template has no $date$: {template!r}")
    return re.compile("".join(stack[0][0]))


@dataclass(frozen=True, slots=True)
class _Compiled:
    kind: str
    regex: re.Pattern[str]


def compile_formats(custom: dict[str, str] | None = None) -> tuple[_Compiled, ...]:
    """Custom templates first, then the defaults, then legacy ones."""
    out: list[_Compiled] = []
    for key, template in (custom or {}).items():
        kind = key.removeprefix("billing.text.format.")
        if kind not in MESSAGE_KINDS:
            raise FormatError(f"unknown billing message {key!r}; expected one of {', '.join(MESSAGE_KINDS)}")
        out.append(_Compiled(kind, compile_template(template)))
    # most lines are transfers and door requests: try those first
    order = ("mover-info-message", "door-request-info-message", "remove-file-info-message",
             "pool-hit-info-message", "storage-info-message", "warning-pnfs-file-info-message")
    for kind in order:
        out.append(_Compiled(kind, compile_template(DEFAULT_FORMATS[kind])))
    for kind, template in LEGACY_FORMATS.items():
        out.append(_Compiled(kind, compile_template(template)))
    return tuple(out)


_DEFAULT_COMPILED = compile_formats()

_PROTO_COLON = re.compile(r"^[A-Za-z][\w]*-[\d.]+:\[?(?P<host>[0-9A-Za-z:._-]+?)\]?:(?P<port>\d+)(?=$|:\D)")
_PROTO_SPACE = re.compile(r"^[A-Za-z][\w]*-[\d.]+ (?P<host>\S+) \d+")


def client_of_protocol(protocol: str) -> str:
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


def _ts(g: dict[str, str | None], ctx: ParseContext) -> int:
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
    return ctx.local_us(year, month, day, int(g["d_h"]), int(g["d_mi"]), int(g["d_s"]), ms)  # type: ignore[arg-type]


def _path(g: dict[str, str | None], ctx: ParseContext) -> str:
    path = g.get("path") or ""
    pnfsid = g.get("pnfsid") or ""
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


def _int(g: dict[str, str | None], name: str) -> int:
    value = g.get(name)
    if value is None:
        raise BadRecord(f"field {name}: missing from the billing format")
    v = int(value)
    if v < 0:
        raise BadRecord(f"field {name}: negative ({v})")
    return v


def _server(cell: str | None) -> str:
    return (cell or "").split("@", 1)[0]


def _failed(g: dict[str, str | None]) -> Reject | None:
    rc = g.get("rc")
    if rc is not None and rc != "0":
        return skip(f"failed (rc={rc}: {g.get('message') or ''})")
    return None


def _mover(g: dict[str, str | None], ctx: ParseContext) -> Access | Reject:
    failed = _failed(g)
    if failed is not None:
        return skip("failed transfer " + failed.reason[len("failed ") :])
    initiator = g.get("initiator") or ""
    if initiator.startswith("pool:"):
        return skip(f"pool-to-pool copy (initiator {initiator})")
    transferred = _int(g, "transferred")
    filesize = _int(g, "filesize")
    created = g.get("created")
    if created is None:
        raise BadRecord("field created: missing from the billing format")
    path = _path(g, ctx)
    if not path:
        raise BadRecord("field path: empty and no pnfsid")
    ts = _ts(g, ctx)
    conn = g.get("connectionTime")
    if conn is not None:
        ts -= int(conn) * 1000
    if created == "true":
        size = filesize if filesize >= transferred else transferred
        return Access(ts, path, size, transferred, "write", _server(g.get("cellName__cell") or g.get("cellName")),
                      client_of_protocol(g.get("protocol") or ""))
    if transferred == 0:
        return skip("zero-byte read (open without data)")
    return Access(ts, path, filesize, transferred, "read",
                  _server(g.get("cellName__cell") or g.get("cellName")), client_of_protocol(g.get("protocol") or ""))


def _delete(g: dict[str, str | None], ctx: ParseContext, client: str = "") -> Access | Reject:
    failed = _failed(g)
    if failed is not None:
        return skip("failed removal " + failed.reason[len("failed ") :])
    path = _path(g, ctx)
    if not path or path.startswith("pnfsid:"):
        return skip(f"removal of a file whose path was never seen (pnfsid {g.get('pnfsid') or '?'})")
    return Access(_ts(g, ctx), path, 0, 0, "delete", "", client)


def _parse(line: str, ctx: ParseContext) -> Access | Reject:
    formats = ctx.state.get("dcache_billing") or _DEFAULT_COMPILED
    if ":request] " in line:  # door requests are half the lines: try their template first
        formats = ctx.state.get("dcache_billing_doors_first") or _doors_first(formats, ctx)
    for fmt in formats:
        m = fmt.regex.fullmatch(line)
        if m is None:
            continue
        g = m.groupdict()
        kind = fmt.kind
        cell_type = g.get("cellType") or ""
        mtype = g.get("type") or ""
        if kind == "mover-info-message":
            return _mover(g, ctx)
        if kind == "door-request-info-message":
            if mtype == "remove":
                chain = g.get("clientChain") or ""
                return _delete(g, ctx, chain.split(",", 1)[0] if chain != "unknown" else "")
            _path(g, ctx)  # learn pnfsid -> path
            return skip(f"door {mtype or 'request'} (the pool's transfer record carries the bytes)")
        if kind == "remove-file-info-message":
            if cell_type == "pool":
                return skip("pool replica removal (the namespace removal is the door's record)")
            return _delete(g, ctx)
        if kind == "pool-hit-info-message":
            _path(g, ctx)
            return skip("pool hit info (the transfer record counts the access)")
        if kind == "storage-info-message":
            return skip(f"tape {mtype or 'store/restore'} (not a client access)")
        return skip(f"billing {mtype or 'warning'} message")
    if not line.strip():
        return skip("blank line")
    raise BadRecord("line matches no billing format (check ingest.dcache_billing.formats)")


FORMAT = Format(NAME, _parse, __doc__ or "", prepare)
