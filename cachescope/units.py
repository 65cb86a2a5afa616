"""Byte sizes as sites write them: `10TB` = 10·10¹², `10TiB` = 10·2⁴⁰, plain integers are bytes."""

from __future__ import annotations

import datetime as dt
import re

from cachescope.errors import UsageError

_UNITS = {
    "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15, "EB": 10**18,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "PIB": 2**50, "EIB": 2**60,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")
U64_MAX = 2**64 - 1  # the one definition: every u64 bound of the contract and the CLI
#: The largest file size (and so bytes read) one access may state: 2^48 bytes = 256 TiB, far beyond any
#: real file (the largest grid files are tens of GB). The store's counters are UInt64 and a window
#: sums its accesses: at this bound 65,536 accesses of the largest size still fit one window's
#: counter, so no realistic window overflows. A record above it is a reject with its reason.
MAX_ACCESS_BYTES = 2**48


class SizeError(UsageError, ValueError):
    """A size that is not one (exit 2); still a ValueError, so pydantic reports it as a field's."""


def parse_size(text: str | int) -> int:
    """Bytes for `text`; decimal (KB…EB) and binary (KiB…EiB) units, fractions allowed (`1.5TB`)."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):  # JSON true is not 1 byte
        raise SizeError(f"size {text!r} is not a number with an optional unit like 10TB or 10TiB")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise SizeError(f"size {text!r} is not a number with an optional unit like 10TB or 10TiB")
        number, unit = m.groups()
        factor = _UNITS.get(unit.upper() if unit else "B")
        if factor is None:
            raise SizeError(f"size {text!r}: unknown unit {unit!r} (use B, KB, MB, GB, TB, PB or KiB … PiB)")
        if "." in number:
            # exact decimal arithmetic: 1.5TB must be 1500000000000, not a float approximation
            whole, _, frac = number.partition(".")
            value, rest = divmod(int((whole or "0") + frac) * factor, 10 ** len(frac))
            if rest:  # "1.5" is not 1 byte: a fraction must land on a whole byte
                raise SizeError(f"size {text!r} is not a whole number of bytes")
        else:
            value = int(number) * factor
    if not 0 < value <= U64_MAX:
        raise SizeError(f"size {text!r} must be between 1 byte and 2^64-1 bytes")
    return value


def parse_size_spec(text: str, working_set: int | None = None) -> int:
    """A size, or `N%` of the trace's working set (unique bytes) when that is known."""
    t = text.strip()
    if t.endswith("%"):
        if working_set is None:
            raise SizeError(f"size {text!r}: a percentage needs a known working set")
        try:
            pct = float(t[:-1])
        except ValueError:
            raise SizeError(f"size {text!r} is not a percentage like 5%") from None
        if not 0 < pct <= 10_000:
            raise SizeError(f"size {text!r}: percentage must be positive")
        return max(1, int(working_set * pct / 100))
    return parse_size(t)


def format_efficiency(v: float | None) -> str:
    """An efficiency for a table: blank when there is none (nothing read), never 0."""
    return "" if v is None or v != v else f"{v:.4f}"


def format_size(n: float, binary: bool = False) -> str:
    """Human-readable size: 10TB style (decimal) or 10TiB style."""
    base, units = (1024, ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]) if binary else (
        1000, ["B", "KB", "MB", "GB", "TB", "PB", "EB"])
    x = float(n)
    for unit in units:
        if abs(x) < base or unit == units[-1]:
            return f"{x:.0f}{unit}" if unit == "B" or x == int(x) else f"{x:.3g}{unit}"
        x /= base
    raise AssertionError("unreachable")


def utc(t: dt.datetime) -> dt.datetime:
    """A time in UTC: a naive one is taken as UTC (what the CLI, the API and the store mean)."""
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)
