"""Query parameters shared by the routes: times, steps, sizes, cache groups (all checked here, so
a bad value is a 422 naming its field, never a store error)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from api.errors import ApiError
from cachescope import reads
from cachescope.config.durations import parse_duration_us
from cachescope.specs import MAX_CAPACITY
from cachescope.store import Store
from cachescope.units import SizeError, parse_size, utc

#: buckets one series request may ask for (range / step)
MAX_BUCKETS = 200_000
#: the store's time columns: DateTime64 from 1900 to 2299, DateTime from 1970 to 2106
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
LATEST = dt.datetime(2106, 1, 1, tzinfo=dt.timezone.utc)


def time_range(store: Store, start: dt.datetime | None, end: dt.datetime | None) -> tuple[dt.datetime, dt.datetime]:
    """[from, to), each defaulting to the span of the stored results (the last 7 days when empty)."""
    if start is None or end is None:
        span = reads.time_span(store)
        if span is None:
            now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
            span = (now - dt.timedelta(days=7), now)
        start = span[0] if start is None else start
        end = span[1] if end is None else end
    start, end = utc(start), utc(end)
    for name, t in (("from", start), ("to", end)):
        if not EARLIEST <= t <= LATEST:
            raise ApiError(422, name, f"{name} {t.isoformat()} is outside 1970…2106")
    if end <= start:
        raise ApiError(422, "to", "`to` must be after `from`")
    return start, end


def step_seconds(step: str, start: dt.datetime, end: dt.datetime, field: str = "step") -> int:
    try:
        us = parse_duration_us(step)
    except ValueError as e:
        raise ApiError(422, field, str(e)) from None
    if us < 1_000_000 or us % 1_000_000 or us > 366 * 86_400_000_000:
        raise ApiError(422, field, f"step {step!r} must be a whole number of seconds, 1s to 366d (1m, 1h, 1d)")
    s = us // 1_000_000
    if (end - start).total_seconds() / s > MAX_BUCKETS:
        raise ApiError(413, field, f"step {step!r} over this range gives more than {MAX_BUCKETS:,} buckets: "
                                   "use a longer step or a shorter range")
    return s


def split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def sizes(values: list[str] | None, field: str = "size") -> list[int]:
    out = []
    for v in split(values):
        try:
            out.append(parse_size(v))
        except SizeError as e:
            raise ApiError(422, field, str(e)) from None
    return out


def one_size(value: str, field: str) -> int:
    got = sizes([value], field)
    if len(got) != 1:
        raise ApiError(422, field, f"{field} must be one size like 10TB, 10TiB or a number of bytes")
    return got[0]


def one_capacity(value: str, field: str) -> int:
    """One size of a cache to simulate: at most 2^63-1 bytes (the engine's bound), else a 422."""
    n = one_size(value, field)
    if n > MAX_CAPACITY:
        raise ApiError(422, field, f"{field} {value!r}: a simulated cache holds at most 2^63-1 bytes (9.2 EB)")
    return n


def groups_of(store: Store, cache_group: list[str] | None, site: str | None) -> list[str]:
    """Cache groups asked for; a site adds (or, alone, means) the groups of that site."""
    groups = split(cache_group)
    if site:
        of_site = site_groups(store, [site])
        groups = [g for g in groups if g in of_site] if groups else of_site
        if not groups:
            raise ApiError(422, "cache_group", f"none of these cache groups belongs to site {site!r}")
    return groups


def site_groups(store: Store, sites: list[str], where: str = "query") -> list[str]:
    """The cache groups of `sites` (the read layer's rule: an unknown site is a 422 naming the
    known ones, for every route alike)."""
    try:
        return reads.site_cache_groups(store, sites)
    except reads.UnknownName as e:
        raise ApiError(422, e.field, str(e), where) from None


def check_names(store: Store, field: str, values: list[str], where: str = "query") -> None:
    """422 naming `field` and the values the store knows, for a value it holds nothing of."""
    try:
        reads.check_known(store, field, values)
    except reads.UnknownName as e:
        raise ApiError(422, e.field, str(e), where) from None


def iso(col) -> list[str]:
    """ISO-8601 UTC strings for a datetime column (vectorised: a Python call per row would
    dominate the answer's time)."""
    s = pd.Series(col)
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    a = s.to_numpy(dtype="datetime64[s]")
    return [t + "+00:00" for t in np.datetime_as_string(a, unit="s").tolist()]


def floats(col) -> list[float]:
    """Floats as a list; NaN (no requests) goes out as JSON null (orjson writes NaN so)."""
    return np.asarray(col, dtype=np.float64).tolist()


def json_response(payload) -> "Response":
    import orjson
    from fastapi import Response

    return Response(orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")
