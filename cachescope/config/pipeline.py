"""What the shadow-cache pipeline runs: policies × sizes, windows, curve grid, sampling.

The `pipeline:` section of the site configuration (cachescope.config); every field has a
default a Tier-2 site can start from.
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from cachescope.admission import AdmissionConfig
from cachescope.config.alerts import AlertRule
from cachescope.config.durations import parse_duration_us
from cachescope.simulation import POLICIES, CacheSpec, log_grid
from cachescope.units import parse_size, parse_size_spec


def _size_text(value: object) -> object:
    """Sizes as the command line takes them: a plain integer (YAML `1000000`) is bytes."""
    if isinstance(value, bool):
        raise ValueError("a size is a number of bytes or a text like 10TB, not true/false")
    if isinstance(value, int):
        return str(value)
    return value


#: a size as the command line takes it: "10TB", "10TiB", "5%" or an integer of bytes
Size = Annotated[str, BeforeValidator(_size_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ShadowCaches(_Strict):
    """The bank every cache group runs: each policy at each size."""

    #: the policies every cache group runs (simcore/src/policy/; not belady, which needs the future)
    policies: list[str] = Field(["lru", "arc", "s3fifo"], min_length=1)
    #: "10TB", "10TiB", "5%" (of storage_capacity) or a plain integer of bytes, as on the command line
    sizes: list[Size] = Field(["1TB", "2TB", "5TB", "10TB", "20TB", "50TB", "100TB", "200TB"], min_length=1)
    #: lets sizes be given as a percentage of the storage behind the cache group ("1%")
    storage_capacity: Optional[Size] = None
    #: per policy: parameter name → value (each policy's file in simcore/src/policy/ names its own):
    #: numbers, and for xcache's sizes and durations too ("300MB", "0.9", "5m")
    params: dict[str, dict[str, float | str]] = {}
    #: the real XCache's configuration file: its pfc.blocksize / pfc.diskusage lines become the
    #: xcache policy's parameters (`params` override them); sizes are its cache filesystem's
    xcache_config: Optional[str] = None
    #: per cache group: `xrdpfc_print -j` output of its real XCache's .cinfo files, the files its
    #: xcache shadows hold when the group starts (a warm start; not applied on a restore)
    xcache_seeds: dict[str, str] = {}
    #: SHARDS sampling of the files the caches see (1: every file)
    sample_rate: float = Field(1.0, gt=0, le=1)
    #: hash partitions per cache (bounded: each one is a cache of its own)
    partitions: int = Field(1, ge=1, le=1024)
    #: what the caches do not insert, so a shadow mirrors its real cache's setup (PIC's CMS
    #: XCache: everything but pileup and unmerged data): an excluded read is a request and a miss
    admission: AdmissionConfig = AdmissionConfig()

    @field_validator("policies")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        v = [p.lower() for p in v]
        bad = [p for p in v if p not in POLICIES]
        if bad:
            raise ValueError(f"unknown policies {bad}; known: {', '.join(POLICIES)}")
        if "belady" in v:
            raise ValueError("belady needs the future: it is for what-if replays, not streaming")
        return v

    @model_validator(mode="after")
    def _sizes_resolve(self) -> "ShadowCaches":
        if any(s.endswith("%") for s in self.sizes) and not self.storage_capacity:
            raise ValueError("sizes in % need storage_capacity (the bytes of storage behind the cache group)")
        capacities = self.capacities()
        unknown = sorted(set(self.params) - set(self.policies))
        if unknown:
            raise ValueError(f"params for {', '.join(unknown)}, which is not in policies {self.policies}")
        if (self.xcache_config or self.xcache_seeds) and "xcache" not in self.policies:
            raise ValueError("xcache_config and xcache_seeds are for the xcache policy, which is not in policies")
        # the engine checks each policy's parameter names: build one cache per policy now, not mid-run
        from cachescope.simulation import ShadowBank

        ShadowBank([CacheSpec(p, capacities[0], self.engine_params(p), self.sample_rate, self.partitions)
                    for p in self.policies], 2)
        return self

    def engine_params(self, policy: str) -> dict[str, float]:
        """A policy's parameters as the engine takes them (xcache: the configuration file's, then
        `params`)."""
        from cachescope.xrdpfc import params_for, read_config

        base = read_config(self.xcache_config) if policy == "xcache" and self.xcache_config else {}
        return {**base, **params_for(policy, self.params.get(policy, {}))}

    def capacities(self) -> list[int]:
        storage = parse_size(self.storage_capacity) if self.storage_capacity else None
        return [parse_size_spec(s, storage) for s in self.sizes]

    def specs(self) -> list[CacheSpec]:
        params = {p: self.engine_params(p) for p in self.policies}
        return [
            CacheSpec(p, c, params[p], self.sample_rate, self.partitions)
            for p in self.policies
            for c in self.capacities()
        ]


class Windows(_Strict):
    """Event-time windows. An event is late when its window closed: window end + allowed
    lateness ≤ watermark, the watermark being the largest timestamp seen minus the bounded
    out-of-orderness."""

    #: the hit/transfer efficiency window (a whole number of seconds dividing an hour)
    efficiency: str = "1m"
    #: the miss-ratio curve's window (a multiple of the efficiency window)
    curve: str = "1h"
    #: the watermark trails the largest event time seen by this much
    max_out_of_orderness: str = "1m"
    #: a window still takes events this long after the watermark passed its end (later: late events)
    allowed_lateness: str = "5m"

    @model_validator(mode="after")
    def _check(self) -> "Windows":
        eff, cur = self.us("efficiency"), self.us("curve")
        if eff <= 0 or cur <= 0 or cur % eff:
            raise ValueError("windows must be positive and the curve window a multiple of the efficiency window")
        # windows are stored at one-second resolution, and hours and days are unions of windows
        if eff % 1_000_000 or 3_600_000_000 % eff:
            raise ValueError(f"efficiency window {self.efficiency!r} must be a whole number of seconds that divides "
                             "one hour (e.g. 10s, 1m, 5m, 15m, 1h)")
        if cur % 1_000_000:
            raise ValueError(f"curve window {self.curve!r} must be a whole number of seconds")
        self.us("max_out_of_orderness"), self.us("allowed_lateness")
        return self

    def us(self, name: str) -> int:
        return parse_duration_us(getattr(self, name))


class Curve(_Strict):
    """The exact (or SHARDS-sampled) LRU miss-ratio curve each cache group keeps."""

    #: keep the LRU miss-ratio curve per cache group
    enabled: bool = True
    #: log-spaced sizes of the curve
    points: int = Field(64, ge=1, le=1024)
    #: smallest size of the curve
    min: Size = "100GB"
    #: largest size of the curve
    max: Size = "10PB"
    #: SHARDS sampling of the curve's files (1: exact)
    sample_rate: float = Field(1.0, gt=0, le=1)
    #: > 0: fixed-size SHARDS, at most this many files tracked
    max_objects: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _range(self) -> "Curve":
        low, high = parse_size(self.min), parse_size(self.max)
        if low > high:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def grid(self) -> list[int]:
        return log_grid(parse_size(self.min), parse_size(self.max), self.points)


class ServerCaches(_Strict):
    """Shared against one cache per server (the Cache servers dashboard): beside a site-wide
    group, its caches again once per server, in groups `GROUP/SERVER` fed each its server's reads
    (no raw events, real-cache rows, curve or alerts of their own; hour windows). On in site mode
    only: in server mode the groups are the servers already."""

    #: run the per-server caches beside each site-wide group (site mode only)
    enabled: bool = True
    #: the per-server caches' policies and sizes (default: the group's first policy, at the group's
    #: sizes: the group's caches again would cost a replay about a quarter more CPU); the dashboard
    #: compares a shared cache of size S with N servers' caches of size S/N, so list S/N for your N
    policies: Optional[list[str]] = None
    #: the per-server caches' sizes (default: the group's sizes)
    sizes: Optional[list[Size]] = None


class PipelineConfig(_Strict):
    shadow: ShadowCaches = ShadowCaches()
    server_caches: ServerCaches = ServerCaches()
    windows: Windows = Windows()
    curve: Curve = Curve()
    #: spread each cache group over this many keyed sub-streams (Flink subtasks): files are
    #: hash-partitioned, each shard runs every cache at size/shards and its rows carry its shard
    #: number; summed over shards they estimate the full-size cache (error in BENCHMARKS.md)
    shards: int = Field(1, ge=1, le=1024)
    #: tier codes per cache group; names beyond it are counted as OTHER
    n_tiers: int = Field(64, ge=2, le=256)
    #: the alert rules every cache group evaluates as its windows close; filled from the site
    #: configuration's `alerts:` section (shipped defaults + site rules), empty when built bare
    alert_rules: list[AlertRule] = []

    def per_server(self) -> "PipelineConfig | None":
        """The configuration of a group's per-server caches (None: off)."""
        sc = self.server_caches
        if not sc.enabled:
            return None
        shadow = self.shadow.model_dump()
        shadow["policies"] = sc.policies if sc.policies is not None else shadow["policies"][:1]
        if sc.sizes is not None:
            shadow["sizes"] = sc.sizes
        # parameters and the real cache's files only of the policies kept
        shadow["params"] = {p: v for p, v in shadow["params"].items() if p in shadow["policies"]}
        if "xcache" not in shadow["policies"]:
            shadow["xcache_config"], shadow["xcache_seeds"] = None, {}
        # hour windows: the comparison is read over ranges, and N servers' minute rows would
        # multiply the group's writes
        windows = {**self.windows.model_dump(), "efficiency": "1h", "curve": "1h"}
        return PipelineConfig.model_validate({**self.model_dump(), "shadow": shadow, "windows": windows,
                                              "curve": {"enabled": False}, "alert_rules": [],
                                              "server_caches": {"enabled": False}})

    @model_validator(mode="after")
    def _rules_fit(self) -> "PipelineConfig":
        from cachescope.config.alerts import resolve_cache

        specs = self.shadow.specs()
        for rule in self.alert_rules:  # every group runs the same bank
            resolve_cache(rule, specs)
        return self
