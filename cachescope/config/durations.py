"""Durations as configuration writes them: `90s`, `1m`, `1h`, `7d`, or ISO-8601 `PT1M`, `P7D`."""

from __future__ import annotations

import re

_SIMPLE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|min|h|d|w)\s*$", re.I)
_ISO = re.compile(r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")
_US = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000, "h": 3_600_000_000,
       "d": 86_400_000_000, "w": 604_800_000_000}


def parse_duration_us(text: str | int) -> int:
    """Microseconds in `text` (an int is taken as seconds)."""
    if isinstance(text, (int, float)):
        return int(text * 1_000_000)
    t = str(text).strip()
    m = _SIMPLE.match(t)
    if m:
        return int(float(m.group(1)) * _US[m.group(2).lower()])
    m = _ISO.match(t.upper())
    if m and any(m.groupdict().values()):
        g = {k: float(v) if v else 0.0 for k, v in m.groupdict().items()}
        seconds = g["w"] * 604_800 + g["d"] * 86_400 + g["h"] * 3_600 + g["m"] * 60 + g["s"]
        return int(seconds * 1_000_000)
    raise ValueError(f"duration {text!r} is not like 90s, 1m, 1h, 7d or ISO-8601 PT1M")
