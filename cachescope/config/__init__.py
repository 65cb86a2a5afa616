"""cachescope configuration: one YAML file, one pydantic-settings model, one section per concern.

```yaml
site: MWT2                       # default site name when neither --site nor the record names one
sites:
  MWT2: {timezone: America/Chicago, vo: atlas}
cache_groups:
  mode: server                   # server | site | region
  region: us-atlas               # group name in region mode
  overrides:                     # first match wins; globs on server and site
    - {server: "xcache*.mwt2.org", group: MWT2-xcache}
tiers:
  rules_files: [site-tiers.yaml] # extend or override the shipped data-tier rules
ingest:
  year: 2024                     # year of dCache billing lines when the file name has none
  dcache_billing:
    formats: {mover-info-message: "$date$ [$cellType$:$cellName$:$type$] ..."}
  http_access:
    log_format: '%h %l %u %t "%r" %>s %b'
```

Environment variables override the file, one rule for every field: `CACHESCOPE_` and its path
joined by `__` (`CACHESCOPE_SITE=...`, `CACHESCOPE_CACHE_GROUPS__MODE=site`, `CACHESCOPE_API__TOKENS`);
the flat names of before (`CACHESCOPE_API_TOKENS` …) are aliases (config/environment.py). This is
the one settings tree: the library's sections, the API's (`api`), the streaming job's (`flink`),
the store's (`store`); docs/settings.md's table of settings is generated from it. Every section
forbids unknown keys so a typo is an error, not a default.
"""

from __future__ import annotations

import contextvars
import fnmatch
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


from cachescope.config.alerts import AlertRule, load_rules, merge_rules  # noqa: E402
from cachescope.config.collect import CollectConfig  # noqa: E402
from cachescope.config.environment import AliasSource  # noqa: E402
from cachescope.config.pipeline import PipelineConfig  # noqa: E402
from cachescope.config.services import ApiConfig, FlinkConfig, StoreConfig  # noqa: E402

class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SiteConfig(_Section):
    timezone: str = Field("UTC", description="IANA zone of the site's log clocks (formats without a zone)")
    vo: str = Field("", description="VO assumed for paths that do not name one")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class CacheGroupOverride(_Section):
    server: str = Field("*", description="glob on the server name")
    site: str = Field("*", description="glob on the site name")
    group: str


class CacheGroupConfig(_Section):
    """Which shadow-cache set an access feeds."""

    mode: Literal["server", "site", "region"] = Field("site", description="one cache group per server, per site, "
                                                      "or one for the region")
    region: str = Field("region", description="the one group name in region mode")
    overrides: list[CacheGroupOverride] = Field(default_factory=list, description="[{server, site, group}] globs; "
                                                "the first match names the group")

    def group_for(self, site: str, server: str) -> str:
        for rule in self.overrides:
            if fnmatch.fnmatchcase(server, rule.server) and fnmatch.fnmatchcase(site, rule.site):
                return rule.group
        if self.mode == "region":
            return self.region
        if self.mode == "server" and server:
            return f"{site}/{server}" if site else server
        # site mode, and server mode for records that name no server
        return site


class TierConfig(_Section):
    rules_files: list[Path] = Field(
        default_factory=list, description="site YAMLs extending the shipped data-tier rules, applied in order"
    )


class DCacheBillingConfig(_Section):
    formats: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "custom billing.text.format.* strings, keyed by message name (mover-info-message, "
            "door-request-info-message, remove-file-info-message, pool-hit-info-message, "
            "storage-info-message, warning-pnfs-file-info-message); tried before the defaults"
        ),
    )


class HttpAccessConfig(_Section):
    log_format: str | None = Field(
        None, description="Apache LogFormat string of the access log; default: combined, then common"
    )


class SpoolConfig(_Section):
    max_bytes: int = Field(1 << 30, ge=1 << 20, description="the collector's spool on disk at most (bytes): beyond, "
                           "the oldest datagrams not yet decoded go, and are counted")
    max_age_s: float = Field(7 * 86400, gt=0, description="spooled datagrams older than this go, decoded or not "
                             "(counted when not)")
    checkpoint_seconds: float = Field(5.0, gt=0, description="`serve --collect`: how often the decoder's and the "
                                      "shadow caches' state is saved with its spool position (a restart decodes "
                                      "the spool from there again)")


class IngestConfig(_Section):
    year: int | None = Field(None, ge=1970, le=9999, description="year for dCache billing dates without one")
    seq_start: int = Field(0, ge=0, description="first seq number of a parse run")
    rejects_per_reason: int = Field(
        1000, ge=0, description="rejected lines written per reason (rejects file, parse's stderr); the rest are counted"
    )
    dcache_billing: DCacheBillingConfig = Field(default_factory=DCacheBillingConfig)
    http_access: HttpAccessConfig = Field(default_factory=HttpAccessConfig)
    spool: SpoolConfig = Field(default_factory=SpoolConfig, description="the collector's durable spool "
                               "(`serve --collect`, `collect --spool`)")
    receive_buffer_bytes: int = Field(64 << 20, ge=4096, description="the collector's UDP receive buffer asked "
                                      "for (the kernel's drops beyond it are counted: `kernel_drops`)")


class WebhookConfig(_Section):
    url: str = Field(..., pattern=r"^https?://", description="Alertmanager-compatible receiver (POST /api/v2/alerts)")
    timeout_s: float = Field(5.0, gt=0)
    retries: int = Field(5, ge=0, description="attempts after the first, with doubling back-off")
    max_queued: int = Field(1000, ge=1, description="alerts waiting beyond this are dropped (and counted), never blocking")


class AlertsConfig(_Section):
    """Alert rules the pipeline evaluates as windows close (cachescope/core/alerts.py)."""

    defaults: bool = Field(True, description="start from the shipped rules (cachescope/config/alert_rules.yaml)")
    rules_files: list[Path] = Field(default_factory=list, description="site YAMLs of `rules:`, applied in order")
    rules: list[AlertRule] = Field(default_factory=list, description="inline rules; a name redefines a default")
    webhook: WebhookConfig | None = Field(None, description="{url, timeout_s, retries, max_queued}: where alerts "
                                          "are POSTed (Alertmanager-compatible)")

    def resolved(self) -> list[AlertRule]:
        lists = [load_rules()] if self.defaults else []
        lists += [load_rules(p) for p in self.rules_files]
        return merge_rules(*lists, self.rules)


_yaml_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar("cachescope_yaml_file", default=None)


class _YamlSource(PydanticBaseSettingsSource):
    """The YAML file given to load_config (none: contributes nothing)."""

    def get_field_value(self, field, field_name):  # pragma: no cover - __call__ does the work
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = _yaml_file.get()
        if path is None:
            return {}
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: the configuration must be a YAML mapping, not {type(data).__name__}")
        return data


class CachescopeConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CACHESCOPE_", env_nested_delimiter="__", extra="forbid")

    site: str = Field("", description="default site name")
    sites: dict[str, SiteConfig] = Field(default_factory=dict, description="per site: {timezone, vo}")
    cache_groups: CacheGroupConfig = Field(default_factory=CacheGroupConfig)
    tiers: TierConfig = Field(default_factory=TierConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    #: the shadow caches, windows and curve every cache group runs (cachescope.core)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    #: `cachescope serve`
    api: ApiConfig = Field(default_factory=ApiConfig)
    #: the streaming job (flink-jobs/shadow_caches.py; its options override these)
    flink: FlinkConfig = Field(default_factory=FlinkConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    #: `cachescope collect`, `serve --collect`
    collect: CollectConfig = Field(default_factory=CollectConfig)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, AliasSource(settings_cls), _YamlSource(settings_cls))

    def site_config(self, site: str) -> SiteConfig:
        return self.sites.get(site) or SiteConfig()


def load_config(path: str | Path | None = None, **overrides: Any) -> CachescopeConfig:
    """Configuration from `path` (YAML; None: defaults), environment variables, then `overrides`.

    Relative `tiers.rules_files` are resolved against the YAML file's directory. Everything is
    checked here: a problem raises UsageError with one line naming the file and the field path
    (`pipeline.curve.min: ...`), never later in the run.
    """
    from pydantic import ValidationError

    from cachescope.errors import UsageError

    where = f"config {path}" if path is not None else "configuration (environment variables)"
    if path is not None and not Path(path).is_file():
        raise UsageError(f"config {path}: {'is a directory' if Path(path).is_dir() else 'no such file'}")
    token = _yaml_file.set(Path(path) if path is not None else None)
    try:
        config = CachescopeConfig(**overrides)
    except ValidationError as exc:
        raise UsageError(f"{where}: {_describe(exc)}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{where}: not valid YAML: {' '.join(str(exc).split())}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{where}: cannot read: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"{where}: {' '.join(str(exc).split())}") from None
    finally:
        _yaml_file.reset(token)
    if path is not None:
        base = Path(path).resolve().parent
        config.tiers.rules_files = [p if p.is_absolute() else base / p for p in config.tiers.rules_files]
        config.alerts.rules_files = [p if p.is_absolute() else base / p for p in config.alerts.rules_files]
    for i, rules in enumerate(config.tiers.rules_files):
        if not rules.is_file():
            raise UsageError(f"{where}: tiers.rules_files[{i}]: no such file {rules}")
    if config.tiers.rules_files:
        from cachescope.tiers import TierClassifier

        try:
            TierClassifier.load(config.tiers.rules_files)
        except Exception as exc:  # noqa: BLE001 - RulesError, YAML errors: name the file
            raise UsageError(f"{where}: tiers.rules_files: {' '.join(str(exc).split())}") from None
    # the core evaluates the alert rules: they travel with the pipeline configuration (Flink state
    # too), checked against the configured shadow caches here
    try:
        pipeline = config.pipeline.model_dump(by_alias=True)
        if config.cache_groups.mode != "site":  # the groups are servers already, or one region
            pipeline["server_caches"]["enabled"] = False
        config.pipeline = PipelineConfig.model_validate({**pipeline, "alert_rules": [
            r.model_dump(by_alias=True) for r in config.alerts.resolved()]})
    except ValidationError as exc:
        raise UsageError(f"{where}: alerts: {_describe(exc)}") from None
    try:
        config.pipeline.per_server()  # the per-server caches' own policies and sizes, checked now
    except ValidationError as exc:
        raise UsageError(f"{where}: pipeline.server_caches: {_describe(exc)}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{where}: alerts: {' '.join(str(exc).split())}") from None
    return config


def _describe(exc: Any) -> str:
    """pydantic's errors as one line: `field.path: message (got value)`; …"""
    parts = []
    for e in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in e["loc"] if x != "__root__") or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        got = e.get("input")
        shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {str(got)[:80]!r})"
        parts.append(f"{loc}: {msg}{shown}")
    return "; ".join(parts)
