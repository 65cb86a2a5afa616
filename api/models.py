"""Request and response models (pydantic), with the OpenAPI examples."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cachescope.admission import AdmissionConfig
from cachescope.specs import MAX_CAPACITY
from cachescope.units import SizeError, parse_size

SizeValue = Union[int, str]


def no_bool_or_float(v: Any) -> Any:
    """A before-validator of size fields: lax parsing took JSON `true` and `1.5` as 1 byte."""
    for x in v if isinstance(v, list) else [v]:
        if isinstance(x, (bool, float)):
            raise ValueError(f"{str(x).lower()} is not a size: give a string like \"10TB\" or \"10TiB\", "
                             "or an integer of bytes")
    return v


def size_bytes(v: SizeValue) -> int:
    try:
        return parse_size(v)
    except SizeError as e:
        raise ValueError(str(e)) from None


def capacity_bytes(v: SizeValue) -> int:
    """A cache size the engine can simulate (sizes up to 2^64-1 are valid elsewhere, e.g. filters)."""
    n = size_bytes(v)
    if n > MAX_CAPACITY:
        raise ValueError(f"size {v!r}: a simulated cache holds at most 2^63-1 bytes (9.2 EB)")
    return n


class ErrorItem(BaseModel):
    loc: list[Union[str, int]]
    msg: str
    type: str


class Error(BaseModel):
    """Every error: FastAPI's `detail` list and the name of the bad field."""
    detail: list[ErrorItem]
    field: str = ""


ERRORS = {code: {"model": Error, "description": d} for code, d in (
    (401, "no or unknown token"), (403, "the token lacks the scope"), (413, "range or body too large"),
    (422, "a bad field (named in `field`)"), (429, "too many what-if replays at once"), (503, "the store failed"))}


class Admission(AdmissionConfig):
    """The library's admission filter, with the API's stricter checks (no bool or float sizes, a bound on tiers)."""

    exclude_tiers: list[str] = Field(default=[], max_length=256, description="tiers never inserted (still requests and misses)")
    max_file_size: Optional[SizeValue] = Field(None, description="files above this size are not inserted: 10GB, 10GiB or bytes")

    _strict_size = field_validator("max_file_size", mode="before")(no_bool_or_float)

    @field_validator("max_file_size")
    @classmethod
    def _size(cls, v):
        return None if v is None else size_bytes(v)


class WhatIfRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra={"examples": [
        {"policy": "arc", "size": "10TB", "from": "2026-01-05T00:00:00Z", "to": "2026-01-12T00:00:00Z",
         "cache_group": "PIC-CMS-XCACHE", "warmup": "P1D"},
        {"policy": ["lru", "arc", "belady"], "size": ["10TB", "50TB"], "from": "2026-01-05T00:00:00Z",
         "to": "2026-01-12T00:00:00Z", "admission": {"exclude_tiers": ["USER"], "max_file_size": "10GB"}},
        {"policy": "lru", "size": "100TB", "from": "2026-01-05T00:00:00Z", "to": "2026-01-12T00:00:00Z",
         "cache_group": ["SITE-A", "SITE-B"]},
    ]})

    policy: Union[str, list[str]] = Field(..., description="a policy of the engine, or a list")
    size: Union[SizeValue, list[SizeValue]] = Field(..., description='"10TB", "10TiB", "937243626598" or bytes; or a list')
    from_: dt.datetime = Field(..., alias="from", description="ISO-8601 start (inclusive)")
    to: dt.datetime = Field(..., description="ISO-8601 end (exclusive)")
    site: Optional[str] = Field(None, max_length=200)
    cache_group: Union[str, list[str], None] = Field(None, description="a group, or several merged as one shared cache")
    warmup: Optional[dt.timedelta] = Field(None, description="ISO-8601 duration before `from` that fills the cache, not counted")
    partitions: Union[Annotated[int, Field(ge=1, le=1024)], Literal["server"]] = Field(
        1, description="N caches of size/N compared with one shared cache of the whole size: one per server when the "
                       "stored accesses of the range name exactly N servers, else routed by file hash (as the engine "
                       "and `cachescope simulate --partitions`); \"server\": one cache per server, however many. The "
                       "answer's `routing` says which was used")
    sample_rate: float = Field(1.0, gt=0, le=1, description="SHARDS spatial sampling rate; the answer states the error bound")
    admission: Optional[Admission] = None
    params: dict[str, dict[str, float]] = Field(default={}, description="policy parameters by policy")
    step: Optional[str] = Field(None, description="also a series per time bucket of this length (1h, 1d)")

    @field_validator("policy")
    @classmethod
    def _policies(cls, v):
        from cachescope.simulation import POLICIES

        items = [v] if isinstance(v, str) else v
        if not items:
            raise ValueError("give at least one policy")
        bad = [p for p in items if p.lower() not in POLICIES]
        if bad:
            raise ValueError(f"unknown policy {', '.join(map(str, bad))[:200]}; known: {', '.join(POLICIES)}")
        return v

    _strict_sizes = field_validator("size", mode="before")(no_bool_or_float)

    @field_validator("size")
    @classmethod
    def _sizes(cls, v):
        items = v if isinstance(v, list) else [v]
        if not items:
            raise ValueError("give at least one size")
        for s in items:
            capacity_bytes(s)
        return v

    @field_validator("cache_group")
    @classmethod
    def _groups(cls, v):
        if isinstance(v, list) and not (1 <= len(v) <= 64):
            raise ValueError("give 1 to 64 cache groups")
        return v

    def policies(self) -> list[str]:
        return [p.lower() for p in ([self.policy] if isinstance(self.policy, str) else self.policy)]

    def sizes(self) -> list[int]:
        return [capacity_bytes(s) for s in (self.size if isinstance(self.size, list) else [self.size])]

    @property
    def single(self) -> bool:
        return not isinstance(self.policy, list) and not isinstance(self.size, list)


class Counts(BaseModel):
    requests: int
    hits: int
    hit_ratio: Optional[float] = Field(..., description="hit efficiency; null where nothing was read")
    bytes_requested: int
    bytes_hit: int
    byte_hit_ratio: Optional[float] = Field(..., description="transfer efficiency; null where no byte was read")
    bytes_filled: int = 0
    evictions: int = 0
    delayed_hits: int = Field(0, description="reads that fetched nothing but waited for blocks still in flight "
                                             "from the origin (xcache with fetch times); not hits")
    delayed_hit_ratio: Optional[float] = Field(None, description="delayed hits / requests")
    misses: int = Field(0, description="requests - hits - delayed_hits")
    bytes_delayed: int = Field(0, description="bytes read that were in flight when the read came")
    bytes_missed: int = Field(0, description="bytes_requested - bytes_hit - bytes_delayed")


class SeriesPoint(Counts):
    time: str


class Shared(Counts):
    note: str


class Sampling(BaseModel):
    sample_rate: float
    sampled_requests: int
    method: str
    hit_ratio_error_bound: Optional[float] = None
    byte_hit_ratio_error_bound: Optional[float] = None
    error_bound_method: Optional[str] = None


class Routing(BaseModel):
    by: Literal["server", "file"] = Field(..., description="server: one cache per server; file: by file hash")
    reason: str


class WhatIfAnswer(Counts):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "policy": "arc", "size_bytes": 10**13, "requests": 7_000_000, "hits": 5_100_000, "hit_ratio": 0.7286,
        "bytes_requested": 26_972_756_482_921, "bytes_hit": 18_000_000_000_000, "byte_hit_ratio": 0.667,
        "bytes_filled": 8_900_000_000_000, "evictions": 1_200_000,
        "by_tier": {"AOD": {"requests": 900_000, "hits": 700_000, "hit_ratio": 0.778, "bytes_requested": 3 * 10**15,
                            "bytes_hit": 2 * 10**15, "byte_hit_ratio": 0.667}}}]})
    policy: str
    size_bytes: int
    by_tier: dict[str, Counts]
    by_cache_group: Optional[dict[str, Counts]] = None
    series: Optional[list[SeriesPoint]] = None
    partitions: Optional[int] = None
    routing: Optional[Routing] = None
    by_server: Optional[dict[str, Counts]] = None
    shared: Optional[Shared] = None
    sampling: Optional[Sampling] = None
    accesses: int = Field(0, description="stored accesses replayed in the range (warm-up not included)")
    warmup_accesses: int = 0
    seconds: float = 0.0


class WhatIfResults(BaseModel):
    results: list[WhatIfAnswer]
    accesses: int
    warmup_accesses: int
    seconds: float


class Point(BaseModel):
    time: list[str]


class EfficiencySeries(BaseModel):
    """One (cache group, policy, size, tier) series, columnar: element i of each list is bucket i."""
    cache_group: str
    policy: str
    size_bytes: int
    tier: str
    time: list[str]
    requests: list[int]
    hits: list[int]
    bytes_requested: list[int]
    bytes_hit: list[int]
    delayed_hits: list[int] = Field([], description="reads that fetched nothing but waited for blocks still in "
                                                    "flight from the origin: not hits (0 unless an xcache shadow has "
                                                    "fetch times)")
    bytes_delayed: list[int] = Field([], description="bytes read that were in flight when the read came")
    hit_efficiency: list[Optional[float]]
    transfer_efficiency: list[Optional[float]]


class EfficiencyAnswer(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "step": "1h", "table": "efficiency_hourly", "from": "2026-01-05T00:00:00+00:00", "to": "2026-01-05T02:00:00+00:00",
        "series": [{"cache_group": "PIC-CMS-XCACHE", "policy": "arc", "size_bytes": 10**13, "tier": "ALL",
                    "time": ["2026-01-05T00:00:00+00:00", "2026-01-05T01:00:00+00:00"], "requests": [4100, 3900],
                    "hits": [2900, 2800], "bytes_requested": [9 * 10**12, 8 * 10**12], "bytes_hit": [6 * 10**12, 5 * 10**12],
                    "delayed_hits": [0, 0], "bytes_delayed": [0, 0], "hit_efficiency": [0.707, 0.718], "transfer_efficiency": [0.667, 0.625]}]}]})
    step: str
    table: str
    from_: str = Field(..., alias="from")
    to: str
    series: list[EfficiencySeries]


class CurvePoint(BaseModel):
    capacity_bytes: int
    requests: float
    hits: float
    bytes_requested: float
    bytes_hit: float
    hit_ratio: Optional[float]
    byte_hit_ratio: Optional[float]


class MrcAnswer(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "policy": "lru", "from": "2026-01-05T00:00:00+00:00", "to": "2026-01-12T00:00:00+00:00",
        "curves": {"ALL": [{"capacity_bytes": 10**13, "requests": 7e6, "hits": 5e6, "bytes_requested": 2.7e16,
                            "bytes_hit": 1.8e16, "hit_ratio": 0.714, "byte_hit_ratio": 0.667}]}, "sample_rate": 1.0}]})
    policy: str
    from_: str = Field(..., alias="from")
    to: str
    sample_rate: Optional[float]
    curves: dict[str, list[CurvePoint]]


class ComparePoint(BaseModel):
    time: str
    observed_transfer_efficiency: Optional[float]
    observed_bytes: int
    shadow: dict[str, Optional[float]]
    difference: dict[str, Optional[float]]
    #: accesses for which the real cache fetched nothing from the origin (its verdict) / its accesses
    observed_hit_efficiency: Optional[float] = None
    observed_accesses: int = 0
    shadow_hit_efficiency: dict[str, Optional[float]] = {}
    #: each shadow's delayed hits (reads that waited for blocks in flight from the origin: not hits)
    shadow_delayed_hits: dict[str, int] = {}
    #: per window, each stored shadow's mean file age (s) as the window's reads found it
    shadow_mean_age_s: dict[str, Optional[float]] = {}
    #: the real cache's transfer efficiency as a range: exact (low = high) when every access's record
    #: carries its bytes from the origin (XRootD >= 5.7.2 b_todisk); else low from its verdict (hits serve
    #: all their bytes), high from b_hit, and approximate is true
    observed_transfer_efficiency_low: Optional[float] = None
    observed_transfer_efficiency_high: Optional[float] = None
    observed_transfer_efficiency_approximate: bool = False
    #: the real cache's WAN bytes (b_todisk + b_bypass) over the accesses that carry them, and its WAN
    #: saving 1 - origin bytes / their bytes read (negative when prefetch fetched more than was read)
    observed_origin_accesses: int = 0
    observed_origin_bytes: int = 0
    observed_wan_saving: Optional[float] = None
    #: each shadow's bytes from the origin (miss bytes; xcache: the blocks it fetched) and WAN saving
    shadow_wan_bytes: dict[str, int] = {}
    shadow_wan_saving: dict[str, Optional[float]] = {}


class CompareAnswer(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "cache_group": "PIC-CMS-XCACHE", "size_bytes": 10**13, "step": "1h", "source": {"xcache": "whatif", "lru": "stored"},
        "overall": {"time": "2026-01-05T00:00:00+00:00", "observed_transfer_efficiency": 0.61, "observed_bytes": 10**15,
                    "shadow": {"xcache": 0.63, "lru": 0.58}, "difference": {"xcache": 0.02, "lru": -0.03}},
        "windows": []}]})
    cache_group: str
    size_bytes: int
    step: str
    source: dict[str, str]
    overall: ComparePoint
    windows: list[ComparePoint]
    note: str = ""


class Bracket(BaseModel):
    """The answer's proof: `lower_size_bytes` misses the target (None: min_size reaches it),
    `upper_size_bytes` (the answer) reaches it, upper ≤ (1 + tolerance) × lower."""
    lower_size_bytes: Optional[int]
    lower_value: Optional[float]
    upper_size_bytes: Optional[int]
    upper_value: Optional[float]
    passes: int
    tolerance: float


class Recommendation(BaseModel):
    policy: str
    target: str
    smallest_size_bytes: Optional[int]
    reached: bool
    value_at_size: Optional[float]
    wan_bytes_saved_per_extra_tb: Optional[float]
    curve: list[dict[str, Any]]
    method: str = ""
    bracket: Optional[Bracket] = None


class RecommendAnswer(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "cache_group": ["PIC-CMS-XCACHE"], "from": "2026-01-05T00:00:00+00:00", "to": "2026-01-12T00:00:00+00:00",
        "method": "LRU from its exact curve, the others by a bracketing search over what-if passes: the smallest "
                  "size reaching the target within 1 %", "optimum": {}, "goal": 0.6,
        "recommendations": []}]})
    cache_group: list[str]
    from_: str = Field(..., alias="from")
    to: str
    method: str
    optimum: dict[str, Any]
    goal: Optional[float] = None
    recommendations: list[Recommendation]


class ConfigRow(BaseModel):
    cache_group: str
    policy: str
    size_bytes: int
    sample_rate: float
    partitions: int
    shards: int
    first_window: str
    last_window: str


class ConfigsAnswer(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "configs": [{"cache_group": "PIC-CMS-XCACHE", "policy": "arc", "size_bytes": 10**13, "sample_rate": 1.0,
                     "partitions": 1, "shards": 1, "first_window": "2026-01-05T00:00:00+00:00",
                     "last_window": "2026-01-12T00:00:00+00:00"}],
        "cache_groups": [{"cache_group": "PIC-CMS-XCACHE", "site": "PIC", "accesses": 7000000, "servers": 4,
                          "first_access": "2026-01-05T00:00:00+00:00", "last_access": "2026-01-11T23:59:59+00:00"}]}]})
    configs: list[ConfigRow]
    cache_groups: list[dict[str, Any]]


class AlertsAnswer(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"alerts": []}]})
    alerts: list[dict[str, Any]]


class Health(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok", "backend": "embedded", "database": "cachescope",
                                                               "busy": False}]})
    status: str
    backend: str
    database: str
    busy: bool = Field(False, description="the store was serving a query (not waited for: it is open and working)")
