"""What the shadow-cache pipeline runs: policies × sizes, windows, curve grid, sampling.

The `pipeline:` section of the site configuration (cachescope.config); every field has a
default a Tier-2 site can start from.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cachescope.admission import AdmissionConfig
from cachescope.core.durations import parse_duration_us
from cachescope.simulation import POLICIES, CacheSpec, log_grid
from cachescope.units import parse_size, parse_size_spec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ShadowCaches(_Strict):
    """The bank every cache group runs: each policy at each size."""

    policies: list[str] = ["lru", "arc", "s3fifo"]
    sizes: list[str] = ["1TB", "2TB", "5TB", "10TB", "20TB", "50TB", "100TB", "200TB"]
    #: lets sizes be given as a percentage of the storage behind the cache group ("1%")
    storage_capacity: Optional[str] = None
    params: dict[str, dict[str, float]] = {}
    sample_rate: float = Field(1.0, gt=0, le=1)
    partitions: int = Field(1, ge=1)
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
        self.capacities()
        return self

    def capacities(self) -> list[int]:
        storage = parse_size(self.storage_capacity) if self.storage_capacity else None
        return [parse_size_spec(s, storage) for s in self.sizes]

    def specs(self) -> list[CacheSpec]:
        return [
            CacheSpec(p, c, self.params.get(p, {}), self.sample_rate, self.partitions)
            for p in self.policies
            for c in self.capacities()
        ]


class Windows(_Strict):
    """Event-time windows. An event is late when its window closed: window end + allowed
    lateness ≤ watermark, the watermark being the largest timestamp seen minus the bounded
    out-of-orderness."""

    efficiency: str = "1m"
    curve: str = "1h"
    max_out_of_orderness: str = "1m"
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

    enabled: bool = True
    points: int = Field(64, ge=1, le=1024)
    min: str = "100GB"
    max: str = "10PB"
    sample_rate: float = Field(1.0, gt=0, le=1)
    #: > 0: fixed-size SHARDS, at most this many files tracked
    max_objects: int = Field(0, ge=0)

    def grid(self) -> list[int]:
        return log_grid(parse_size(self.min), parse_size(self.max), self.points)


class PipelineConfig(_Strict):
    shadow: ShadowCaches = ShadowCaches()
    windows: Windows = Windows()
    curve: Curve = Curve()
    #: spread each cache group over this many keyed sub-streams (Flink subtasks): files are
    #: hash-partitioned, each shard runs every cache at size/shards and its rows carry its shard
    #: number; summed over shards they estimate the full-size cache (error in BENCHMARKS.md)
    shards: int = Field(1, ge=1, le=1024)
    #: tier codes per cache group; names beyond it are counted as OTHER
    n_tiers: int = Field(64, ge=2, le=256)
