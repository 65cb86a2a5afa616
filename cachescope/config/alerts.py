"""Alert rules as data: the model, the shipped defaults (alert_rules.yaml), a site's additions.

The processing core evaluates them (cachescope/core/alerts.py); the Grafana alerting files are
generated from the same rules (dashboards/alerting.py).
"""

from __future__ import annotations

import fnmatch
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cachescope.config.durations import parse_duration_us
from cachescope.units import parse_size

if TYPE_CHECKING:
    from cachescope.simulation import CacheSpec

DAY_US = 86_400_000_000


class AlertRule(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(..., pattern=r"^[A-Za-z0-9_.:-]+$")
    kind: Literal["below", "drop", "real_below_shadow", "stalled", "late"]
    severity: Literal["critical", "warning", "info"] = "warning"
    metric: Literal["hit", "transfer"] = "hit"
    #: `shadow`: one of the shadow caches; `observed`: the real cache (transfer efficiency only: exact with
    #: b_todisk on every access, else its upper bound, b_hit's share)
    source: Literal["shadow", "observed"] = "shadow"
    #: the shadow cache: a configured policy (default: the first) and size (default: the largest)
    policy: Optional[str] = None
    size: Optional[str] = None
    threshold: float = Field(0.0, ge=0, le=1, description="below: efficiency under this fires")
    drop: float = Field(0.3, gt=0, le=1, description="drop: fraction below the baseline that fires")
    baseline_days: int = Field(7, ge=1, le=28)
    #: drop: at least this many of the previous days must have data for a baseline
    min_baseline_days: int = Field(1, ge=1, le=28)
    margin: float = Field(0.1, gt=0, le=1, description="real_below_shadow: shadow minus real above this fires")
    min_events: int = Field(1, ge=1, description="stalled: fewer read accesses than this over the period fires")
    max_rate: float = Field(0.01, ge=0, le=1, description="late: late events per event above this fires")
    #: no verdict on fewer read accesses than this in the period (a quiet night is not a drop)
    min_requests: int = Field(100, ge=0)
    over: str = "1h"
    #: no verdict before the group's stream is this old: the shadow caches start cold
    warmup: str = "2h"
    for_: str = Field("15m", alias="for")
    cache_groups: list[str] = Field(default_factory=lambda: ["*"], description="globs on the cache group")
    summary: Optional[str] = None

    @field_validator("over", "for_", "warmup")
    @classmethod
    def _duration(cls, v: str) -> str:
        if parse_duration_us(v) < 0:
            raise ValueError(f"negative duration {v!r}")
        return v

    @field_validator("size")
    @classmethod
    def _size(cls, v: Optional[str]) -> Optional[str]:
        if v is not None:
            parse_size(v)
        return v

    @model_validator(mode="after")
    def _fits(self) -> "AlertRule":
        if self.source == "observed" and self.metric != "transfer":
            raise ValueError(f"rule {self.name}: the real cache reports bytes only: metric must be transfer")
        if self.kind == "drop" and parse_duration_us(self.over) > DAY_US:
            raise ValueError(f"rule {self.name}: a drop compares hours of previous days: over is at most 1d")
        if parse_duration_us(self.over) <= 0:
            raise ValueError(f"rule {self.name}: over must be positive")
        return self

    def applies_to(self, cache_group: str) -> bool:
        return any(fnmatch.fnmatchcase(cache_group, g) for g in self.cache_groups)


class AlertRules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[AlertRule] = Field(default_factory=list)


def load_rules(path: str | Path | None = None) -> list[AlertRule]:
    """Rules of a YAML file (`rules: [...]`); None: the shipped defaults."""
    if path is None:
        text = resources.files("cachescope.config").joinpath("alert_rules.yaml").read_text()
        where = "the shipped alert_rules.yaml"
    else:
        text = Path(path).read_text()
        where = str(path)
    data = yaml.safe_load(text) or {}
    try:
        return AlertRules.model_validate(data).rules
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def merge_rules(*lists: list[AlertRule]) -> list[AlertRule]:
    """Later lists override earlier rules of the same name (a site redefines a default)."""
    out: dict[str, AlertRule] = {}
    for rules in lists:
        for r in rules:
            out[r.name] = r
    return list(out.values())



def resolve_cache(rule: AlertRule, specs: list["CacheSpec"], cache_group: str = "*") -> tuple[int, str, int]:
    """(index in the bank, policy, size) of the shadow cache a rule reads; (-1, "", 0) for rules
    that read none (stalled, late, the real cache alone). Refuses a cache the bank does not run."""
    if not (rule.kind in ("below", "drop") and rule.source == "shadow" or rule.kind == "real_below_shadow"):
        return -1, "", 0
    policies = [s.policy for s in specs]
    policy = rule.policy or (policies[0] if policies else "")
    sizes = sorted({s.capacity for s in specs if s.policy == policy})
    if not sizes:
        raise ValueError(f"alert rule {rule.name}: cache group {cache_group!r} runs no {policy!r} shadow cache "
                         f"(configured: {', '.join(sorted(set(policies)))})")
    size = parse_size(rule.size) if rule.size else sizes[-1]
    if size not in sizes:
        raise ValueError(f"alert rule {rule.name}: no {policy} shadow cache of {rule.size} "
                         f"(configured sizes: {', '.join(str(s) for s in sizes)} bytes)")
    index = next(i for i, s in enumerate(specs) if s.policy == policy and s.capacity == size)
    return index, policy, size
