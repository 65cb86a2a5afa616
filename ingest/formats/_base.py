"""What every format parser shares: its result types, its per-stream context, field helpers.

A parser is a function `parse(line, ctx) -> Access | Reject | list[Access | Reject]`:
`Access` is what the record says about one access (enrichment adds path normalisation, file_id,
tier, cache group and seq), `Reject` a line that gives no access, with its reason. Parsers signal
a bad field by raising `BadRecord(reason)`; `Format.parse` turns that into a `Reject`, and any
other exception into a Reject whose reason starts with INTERNAL_ERROR (a bug: the fuzz tests
require none), so `Format.parse` never raises.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Callable, Union

import msgspec

from cachescope.units import U64_MAX
INTERNAL_ERROR = "internal error"
MEMO_LIMIT = 1_000_000  # entries of a stream's memo (ParseContext.remember) before it starts over
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)


class Access(msgspec.Struct, gc=False):
    """One access as a log record states it (before enrichment)."""

    ts: int  # UTC microseconds
    path: str  # as logged; enrichment normalises it
    file_size: int
    bytes_read: int
    op: str  # read | write | delete
    server: str = ""
    client: str = ""
    vo: str = ""  # hint from the record (e.g. an FQAN); the path's rules decide first
    site: str = ""  # when the record names its site
    observed_hit_bytes: int | None = None
    observed_miss_bytes: int | None = None
    observed_bypass_bytes: int | None = None
    tier: str = ""  # when the record states it (csv trace)
    file_id: int | None = None  # when the record states it (csv trace obj_id)
    observed_hit: int | None = None  # a real cache's verdict: 1 nothing fetched from the origin, 0 fetched
    observed_origin_bytes: int | None = None  # a real cache's bytes from the origin (b_todisk + b_bypass)
    duration_us: int | None = None  # how long the access lasted, when the record says


class Reject(msgspec.Struct, gc=False):
    """A line that yields no access. `skipped`: well-formed, but not an access that counts."""

    reason: str
    skipped: bool = False


Result = Union[Access, Reject, list]


class BadRecord(Exception):
    """Raised inside a parser for a field it cannot use; becomes Reject(reason)."""

    def __init__(self, reason: str, skipped: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.skipped = skipped


def skip(reason: str) -> Reject:
    return Reject(reason, True)


class Held(Reject):
    """A line whose verdict waits for the lines after it (a piece of a binary g-stream header that
    holds a newline byte): the parser keeps it and a later line's parse decides, by setting
    `ctx.state[HELD_VERDICT]`: "" = the held lines were what they seemed (skipped with this reason),
    any other text = they were not (rejected with that reason)."""


HELD_VERDICT = "held_verdict"
#: the state a format keeps while it holds lines (cleared by the parser at the end of its input; the
#: compiled g-stream builder declines every line while it is set)
HELD_PENDING = "held_pending"


@dataclass(slots=True)
class ParseContext:
    """Everything a parser may know beyond the line: set once per input stream."""

    site: str = ""
    tz: tzinfo = timezone.utc  # the site's clock, for formats whose times have no zone
    year: int | None = None  # for dCache billing's yearless dates
    server: str = ""  # default server when the record names none
    source_name: str = ""  # input file name
    options: dict[str, Any] = field(default_factory=dict)  # format settings from the config
    # Per-stream memory, bounded: ids learnt from earlier records (dCache pnfsid -> path, EOS
    # fid -> path, HTTP path -> size) and stream state (the last g-stream header's host).
    memo: dict[Any, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    _hour_cache: dict[tuple[int, int, int, int], int] = field(default_factory=dict)

    def remember(self, key: Any, value: Any) -> None:
        memo = self.memo
        if len(memo) >= MEMO_LIMIT:
            memo.clear()  # bounded memory; losing old ids only costs later lookups
        memo[key] = value

    def local_us(self, year: int, month: int, day: int, hour: int, minute: int, second: int, micro: int = 0) -> int:
        """UTC microseconds of a wall-clock time on the site's clock (cached per hour)."""
        key = (year, month, day, hour)
        base = self._hour_cache.get(key)
        if base is None:
            try:
                dt = datetime(year, month, day, hour, tzinfo=self.tz)
            except ValueError as exc:
                raise BadRecord(f"date {year:04d}-{month:02d}-{day:02d} {hour:02d}h: {exc}") from None
            base = (dt - _EPOCH) // _ONE_US
            if len(self._hour_cache) > 100_000:
                self._hour_cache.clear()
            self._hour_cache[key] = base
        if minute > 59 or second > 60:
            raise BadRecord(f"time {hour:02d}:{minute:02d}:{second:02d} out of range")
        return base + (minute * 60 + second) * 1_000_000 + micro


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    raw: Callable[[str, ParseContext], Result]  # may raise BadRecord
    doc: str
    prepare: Callable[[ParseContext], None] | None = None  # compile per-stream options
    # optional: results of a whole list of lines at once (None: use raw line by line), each what
    # parse() gives for the line (None for blank lines), in order; see LineParser.batches
    block: Callable[[list[str], ParseContext], list | None] | None = None
    # optional: a compiled parser + enricher that builds event columns itself, made per stream
    # from (ctx, enricher), or None when it cannot serve this stream; see LineParser.column_batches
    columns: Callable[[ParseContext, Any], Any] | None = None

    def parse(self, line: str, ctx: ParseContext) -> Result:
        """Parse one line; never raises."""
        try:
            return self.raw(line, ctx)
        except BadRecord as exc:
            return Reject(exc.reason, exc.skipped)
        except Exception as exc:  # a parser bug: keep the line, name the bug
            return Reject(f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------
# field helpers (raise BadRecord naming the field)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def uint(value: Any, name: str) -> int:
    """A non-negative 64-bit integer from JSON/text (int, integral float, numeric string)."""
    t = type(value)
    if t is int:
        if 0 <= value <= U64_MAX:
            return value
        raise BadRecord(f"field {name}: {value} is not a 64-bit unsigned integer")
    if t is str:
        s = value.strip()
        if s.isdigit() and s.isascii():
            v = int(s)
            if v <= U64_MAX:
                return v
            raise BadRecord(f"field {name}: {s} does not fit in 64 bits")
        try:
            f = float(s)
        except ValueError:
            raise BadRecord(f"field {name}: not a number: {_show(value)}") from None
        return uint(f, name)
    if t is float:
        if math.isfinite(value) and 0 <= value < 1.8446744073709552e19:
            return int(value)
        raise BadRecord(f"field {name}: {value} is not a byte count")
    if value is None:
        raise BadRecord(f"field {name}: missing")
    raise BadRecord(f"field {name}: not a number: {_show(value)}")


def text(value: Any, name: str) -> str:
    if type(value) is str:
        return value
    if value is None:
        raise BadRecord(f"field {name}: missing")
    if type(value) in (int, float):
        return str(value)
    raise BadRecord(f"field {name}: not a string: {_show(value)}")


def opt_text(value: Any) -> str:
    t = type(value)
    if t is str:
        return value
    if t is int or t is float:
        return str(value)
    return ""


_MS_LIMIT = 1e11  # epoch seconds stay below this until the year 5138; milliseconds pass it in 1973
_US_LIMIT = 1e14
_NS_LIMIT = 1e17


def epoch_us(value: Any, name: str) -> int:
    """UTC microseconds from an epoch number in s, ms, us or ns (told apart by magnitude)."""
    t = type(value)
    if t is str:
        s = value.strip()
        try:
            value = int(s) if s.isdigit() else float(s)
        except ValueError:
            raise BadRecord(f"field {name}: not an epoch time: {_show(s)}") from None
        t = type(value)
    if t is int or t is float:
        if not (t is int or math.isfinite(value)) or value <= 0:
            raise BadRecord(f"field {name}: not an epoch time: {_show(value)}")
        if value < _MS_LIMIT:
            us = value * 1_000_000
        elif value < _US_LIMIT:
            us = value * 1_000
        elif value < _NS_LIMIT:
            us = value
        elif value < 1e20:
            us = value / 1_000 if t is float else value // 1_000
        else:
            raise BadRecord(f"field {name}: epoch time {value} out of range")
        return int(us) if t is int else int(round(us))
    if value is None:
        raise BadRecord(f"field {name}: missing")
    raise BadRecord(f"field {name}: not an epoch time: {_show(value)}")


def iso_us(value: Any, name: str, tz: tzinfo) -> int:
    """UTC microseconds from an ISO-8601 date-time (no offset: the site's zone)."""
    if type(value) is not str:
        if value is None:
            raise BadRecord(f"field {name}: missing")
        raise BadRecord(f"field {name}: not a date-time: {_show(value)}")
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise BadRecord(f"field {name}: not an ISO-8601 date-time: {_show(value)}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    try:
        return (dt - _EPOCH) // _ONE_US
    except OverflowError:
        raise BadRecord(f"field {name}: date-time out of range: {_show(value)}") from None





_URL_HOST = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://(?:[^@/?#]*@)?(?:\[([^\]/?#]*)\]?|([^:/?#]*))")


def host_of_url(url: str) -> str:
    """Host of scheme://[user@]host[:port]/...; '' if none."""
    m = _URL_HOST.match(url)
    if m is None:
        return ""
    return m.group(1) or m.group(2) or ""


_AT = re.compile(r"^(.*?)(?: - at `\$\.?([^`]*)`)?$", re.S)


def decode_struct(decoder: "msgspec.json.Decoder", line: str) -> Any:
    """A typed JSON record (unknown keys ignored); a wrong type names its field in the reason."""
    try:
        return decoder.decode(line)
    except msgspec.ValidationError as exc:
        m = _AT.match(str(exc))
        what, where = (m.group(1), m.group(2)) if m else (str(exc), "")
        what = what.replace("`", "")
        raise BadRecord(f"field {where}: {what[:1].lower()}{what[1:]}" if where else f"not a record: {what}") from None
    except msgspec.DecodeError as exc:
        raise BadRecord(f"not valid JSON: {exc}") from None
    except RecursionError:  # msgspec skips unknown values recursively: a hostile nesting depth
        raise BadRecord("not valid JSON: nested too deeply (more than the interpreter's recursion limit)") from None


def json_object(line: str, loads: Callable[[str], Any]) -> dict[str, Any]:
    try:
        obj = loads(line)
    except ValueError as exc:
        raise BadRecord(f"not valid JSON: {exc}") from None
    if type(obj) is not dict:
        raise BadRecord(f"not a JSON object but {type(obj).__name__}")
    return obj
