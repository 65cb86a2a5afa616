import re
from pathlib import Path

import pytest

from cachescope.config import CacheGroupConfig, CacheGroupOverride, load_config
from cachescope.errors import UsageError


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


@pytest.mark.parametrize(
    "text, where",
    [
        ("pipeline: {shadow: {partitions: 100000000}}\n", "pipeline.shadow.partitions: "),
        ("pipeline: {shards: 0}\n", "pipeline.shards: "),
        ("pipeline: {curve: {min: 10PB, max: 1TB}}\n", "pipeline.curve: min 10PB is above max 1TB"),
        ("pipeline: {curve: {min: lots}}\n", "pipeline.curve"),
        ("pipeline: {shadow: {sizes: []}}\n", "pipeline.shadow.sizes: "),
        ("pipeline: {shadow: {policies: []}}\n", "pipeline.shadow.policies: "),
        ("pipeline: {shadow: {sizes: [5%]}}\n", "storage_capacity"),
        ("pipeline: {shadow: {sizes: [true]}}\n", "pipeline.shadow.sizes.0"),
        ("pipeline: {shadow: {policies: [lru], params: {lru: {nosuch: 1}}}}\n", "policy lru has no parameter(s) nosuch"),
        ("pipeline: {shadow: {policies: [lru], params: {arc: {p: 1}}}}\n", "params for arc"),
        ("pipeline: {windows: {efficiency: 7x}}\n", "pipeline.windows"),
        ("tiers: {rules_files: [missing.yaml]}\n", "tiers.rules_files[0]: no such file"),
        ("pipeline: [\n", "not valid YAML"),
        ("- a list\n", "mapping"),
        ("cache_groups: {mode: pool}\n", "cache_groups.mode: "),
        ("sites: {X: {timezone: Mars/Olympus}}\n", "sites.X.timezone: unknown time zone"),
        ("cache_group: {mode: site}\n", "cache_group: Extra inputs"),  # typo of a section name
        ("ingest: {year: 12}\n", "ingest.year: "),
    ],
)
def test_everything_is_checked_at_load_time(tmp_path: Path, text: str, where: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    # one line naming the file and the field path, a usage error (exit 2)
    with pytest.raises(UsageError, match=re.escape(where)) as caught:
        load_config(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value) and caught.value.exit_code == 2


def test_sizes_are_taken_as_the_command_line_takes_them(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("pipeline: {shadow: {sizes: [1000000000000, 2TB, 1TiB]}, curve: {min: 1000000, max: 1TB}}\n")
    cfg = load_config(path)
    assert cfg.pipeline.shadow.capacities() == [10**12, 2 * 10**12, 2**40]
    assert cfg.pipeline.curve.grid()[0] == 10**6


def test_a_missing_config_file_is_named(tmp_path: Path):
    with pytest.raises(UsageError, match="no such file"):
        load_config(tmp_path / "none.yaml")
