from pathlib import Path

import pytest
from pydantic import ValidationError

from cachescope.config import CacheGroupConfig, CacheGroupOverride, load_config


def test_defaults_without_file():
    cfg = load_config()
    assert cfg.cache_groups.mode == "site"
    assert cfg.site_config("ANY").timezone == "UTC"


def test_yaml_file_sections_and_relative_rules_path(tmp_path: Path):
    (tmp_path / "site-tiers.yaml").write_text("vos: {}\n")
    path = tmp_path / "cachescope.yaml"
    path.write_text(
        "site: MWT2\n"
        "sites:\n  MWT2: {timezone: America/Chicago, vo: atlas}\n"
        "cache_groups:\n  mode: server\n  overrides:\n    - {server: 'xcache*', group: MWT2-xcache}\n"
        "tiers:\n  rules_files: [site-tiers.yaml]\n"
        "ingest:\n  year: 2019\n"
    )
    cfg = load_config(path)
    assert cfg.site == "MWT2" and cfg.sites["MWT2"].timezone == "America/Chicago"
    assert cfg.tiers.rules_files == [tmp_path / "site-tiers.yaml"]
    assert cfg.ingest.year == 2019
    assert cfg.cache_groups.group_for("MWT2", "xcache.mwt2.org") == "MWT2-xcache"
    assert cfg.cache_groups.group_for("MWT2", "pool7") == "MWT2/pool7"


def test_environment_overrides_file(tmp_path: Path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text("cache_groups: {mode: server}\n")
    monkeypatch.setenv("CACHESCOPE_CACHE_GROUPS__MODE", "region")
    assert load_config(path).cache_groups.mode == "region"


@pytest.mark.parametrize(
    "text, where",
    [
        ("cache_groups: {mode: pool}\n", "mode"),
        ("sites: {X: {timezone: Mars/Olympus}}\n", "time zone"),
        ("cache_group: {mode: site}\n", "cache_group"),  # typo of a section name
        ("ingest: {year: 12}\n", "year"),
    ],
)
def test_bad_config_is_an_error_naming_the_field(tmp_path: Path, text: str, where: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError, match=where):
        load_config(path)


def test_group_modes():
    assert CacheGroupConfig(mode="site").group_for("BNL", "dcdoor1") == "BNL"
    assert CacheGroupConfig(mode="server").group_for("BNL", "pool3") == "BNL/pool3"
    assert CacheGroupConfig(mode="server").group_for("BNL", "") == "BNL"
    assert CacheGroupConfig(mode="region", region="us").group_for("BNL", "pool3") == "us"
    cfg = CacheGroupConfig(
        mode="server",
        overrides=[CacheGroupOverride(server="pool-atlas-*", site="B*", group="atlas-pools"),
                   CacheGroupOverride(server="*", site="AGLT2", group="aglt2")],
    )
    assert cfg.group_for("BNL", "pool-atlas-3") == "atlas-pools"
    assert cfg.group_for("MWT2", "pool-atlas-3") == "MWT2/pool-atlas-3"
    assert cfg.group_for("AGLT2", "anything") == "aglt2"
