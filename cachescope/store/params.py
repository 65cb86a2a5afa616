"""Query parameters: Python values → ClickHouse's text form of a `{name:Type}` parameter.

Both backends take parameters as text (chdb's `params=`, the native protocol's parameter
settings), and the server parses them by the declared type. Rendering them here, once, makes
the two backends agree: datetimes keep their microseconds and are always UTC.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Mapping

import numpy as np


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _datetime_text(v: dt.datetime) -> str:
    if v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v.strftime("%Y-%m-%d %H:%M:%S.%f")


def render(value: Any, nested: bool = False) -> str:
    """The text of one parameter value (nested: an element of an array or tuple, quoted)."""
    if value is None:
        return "NULL" if nested else "\\N"
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, np.datetime64):
        value = value.astype("datetime64[us]").item()
        if isinstance(value, int):  # out of datetime's range
            raise ValueError(f"datetime64 {value} outside the supported range")
    if isinstance(value, dt.datetime):
        text = _datetime_text(value)
        return _quote(text) if nested else text
    if isinstance(value, dt.date):
        return _quote(value.isoformat()) if nested else value.isoformat()
    if isinstance(value, str):
        return _quote(value) if nested else value
    if isinstance(value, bytes):
        return render(value.decode(), nested)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        inner = ", ".join(render(x, nested=True) for x in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    raise TypeError(f"cannot pass a {type(value).__name__} as a ClickHouse query parameter")


def render_all(params: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: render(v) for k, v in (params or {}).items()}


def for_driver(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Parameters for clickhouse-driver's server-side binding.

    The driver escapes by Python type: a str twice (the server reads a String parameter in
    escaped form), a list element by element inside one quoted literal (an Array parameter is
    read as is). So scalars become our text, collections stay Python lists of such values.
    """
    return {k: _driver_value(v) for k, v in (params or {}).items()}


def _driver_value(value: Any) -> Any:
    if isinstance(value, (list, tuple, np.ndarray)):
        items = [_driver_value(x) for x in (value.tolist() if isinstance(value, np.ndarray) else value)]
        return items if not isinstance(value, tuple) else tuple(items)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    return render(value)  # date-times (microseconds, UTC), decimals: as text
