"""One settings tree (cachescope.config): one environment rule, the flat names of before kept as
aliases, every documented variable working, docs/settings.md's table generated from the classes."""

from __future__ import annotations

import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from cachescope.config import load_config
from cachescope.config.environment import ALIASES, settings, settings_table, variable
from cachescope.errors import UsageError

REPO = Path(__file__).resolve().parents[4]

#: CACHESCOPE_* variables the docs name that are not settings of the tree, with the reason
NOT_SETTINGS = {
    "CACHESCOPE_IMAGE": "docker-compose's image of the services",
    "CACHESCOPE_FLINK_IMAGE": "docker-compose's image of the Flink cluster",
    "CACHESCOPE_ALERT_WEBHOOK_URL": "Grafana's alert contact point (dashboards/provisioning/alerting)",
    "CACHESCOPE_VAR_DIR": "scripts/services: where the local servers keep their data",
    "CACHESCOPE_CACHE_DIR": "scripts/services: where downloaded servers are kept",
    "CACHESCOPE_START_TIMEOUT": "scripts/services: how long a server may take to start",
    "CACHESCOPE_UPDATE_SNAPSHOTS": "tests/python/unit/store/test_migrations.py: rewrite the schema snapshots",
    "CACHESCOPE_SIMCORE_SRC": "cachescope/engine.py: the Rust sources the compiled engine is checked against "
                              "(read before any setting is loaded)",
}


def documented_variables() -> set[str]:
    """Every CACHESCOPE_* name in the docs, the deployment files and the scripts' README."""
    files = subprocess.run(["git", "ls-files", "*.md", "*.yaml", "*.yml", ".env.example", "*.sh", "*Dockerfile",
                            "scripts/services"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    names = set()
    for name in files:
        if name.startswith("tests/"):
            continue
        text = (REPO / name).read_text(errors="replace")
        names |= {m for m in re.findall(r"CACHESCOPE_[A-Z0-9_]+", text) if not m.endswith("_")}
    return names


def _sample(path: str) -> tuple[str, object]:
    """An environment value for a setting other than its default, and what the tree then holds."""
    from cachescope.config import CachescopeConfig

    model, field = CachescopeConfig, None
    for part in path.split("."):
        field = model.model_fields[part]
        model = field.annotation
    optional = typing.get_origin(field.annotation) in (typing.Union, getattr(__import__("types"), "UnionType"))
    kinds = [a for a in typing.get_args(field.annotation) if a is not type(None)] if optional else [field.annotation]
    kind, default = kinds[0], field.get_default(call_default_factory=True)
    if typing.get_origin(kind) is typing.Literal:
        value = next(v for v in typing.get_args(kind) if v != default)
        return value, value
    if kind is bool:
        return str(not default).lower(), not default
    if kind is int:
        return str(default + 1), default + 1
    if kind is float:
        return str(default + 1), default + 1.0
    if kind is Path:
        return "/srv/cachescope-test", Path("/srv/cachescope-test")
    if typing.get_origin(kind) is list:
        return '["https://a.example"]', ["https://a.example"]
    if path == "api.clickhouse_url":
        return "clickhouse://db.example:9000", "clickhouse://db.example:9000"
    return "checked-value", "checked-value"


def _get(config, path: str):
    for part in path.split("."):
        config = getattr(config, part)
    return config


def test_the_documented_table_is_the_tree():
    text = (REPO / "docs" / "settings.md").read_text()
    block = re.search(r"<!-- settings table:[^\n]*-->\n(.*?)\n<!-- end of settings table -->", text, re.S)
    assert block, "docs/settings.md has no generated settings table"
    assert block.group(1) == settings_table(), (
        "docs/settings.md's settings table is not the tree's: regenerate it with\n"
        "  .venv/bin/python scripts/lib/regen_docs.py")


def test_every_setting_says_what_it_is():
    assert [p for p, _, meaning in settings() if not meaning] == []


def test_every_documented_variable_is_a_setting_or_listed():
    tree = {variable(p) for p, _, _ in settings()} | set(ALIASES)
    names = documented_variables()
    assert {"CACHESCOPE_API_TOKENS", "CACHESCOPE_API_TOKENS_FILE", "CACHESCOPE_MIGRATIONS_DIR",
            "CACHESCOPE_IMAGE"} <= names  # the walk finds docs/, deploy/, .env.example, ddl/README
    unknown = sorted(names - tree - set(NOT_SETTINGS))
    assert not unknown, f"documented but neither a setting nor listed in NOT_SETTINGS: {unknown}"


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_every_flat_name_of_before_still_sets_its_field(name, monkeypatch):
    path = ALIASES[name]
    raw, want = _sample(path)
    monkeypatch.setenv(name, raw)
    assert _get(load_config(None), path) == want
    section, _, field = path.partition(".")
    if section == "api":  # what `cachescope serve` runs
        from api.core.config import Settings

        assert getattr(Settings(), field) == want


@pytest.mark.parametrize("path", sorted({p for p, _, _ in settings()
                                         if p.startswith(("api.", "flink.", "store.", "ingest.", "cache_groups.",
                                                          "pipeline.windows."))}
                                     # lists of mappings: test_config.py
                                     - {"cache_groups.overrides", "ingest.dcache_billing.formats"}))
def test_every_nested_name_sets_its_field(path, monkeypatch):
    if path.startswith("pipeline.windows."):  # windows must divide each other: a value that keeps them valid
        raw, want = {"efficiency": ("30s", "30s"), "curve": ("2h", "2h")}.get(path.rsplit(".", 1)[1], ("2m", "2m"))
    elif path == "ingest.year":
        raw, want = "2023", 2023
    else:
        raw, want = _sample(path)
    monkeypatch.setenv(variable(path), raw)
    assert _get(load_config(None), path) == want


def test_a_nested_name_wins_over_its_alias(monkeypatch):
    from api.core.config import Settings

    monkeypatch.setenv("CACHESCOPE_WHATIF_MAX_DAYS", "90")
    monkeypatch.setenv("CACHESCOPE_API__WHATIF_MAX_DAYS", "120")
    assert load_config(None).api.whatif_max_days == 120
    assert Settings().whatif_max_days == 120
    assert Settings(whatif_max_days=7).whatif_max_days == 7  # serve's options over the environment


def test_the_yaml_file_gives_the_services_sections_and_the_environment_wins(tmp_path, monkeypatch):
    site = tmp_path / "site.yaml"
    site.write_text("api: {whatif_max_days: 180}\nflink: {bootstrap: 'kafka:9092', flush_rows: 5000}\n")
    monkeypatch.setenv("CACHESCOPE_FLINK__FLUSH_ROWS", "7000")
    config = load_config(site)
    assert (config.api.whatif_max_days, config.flink.bootstrap, config.flink.flush_rows) == (180, "kafka:9092", 7000)


def test_a_bad_value_is_one_line_naming_the_setting(monkeypatch):
    monkeypatch.setenv("CACHESCOPE_MAX_CONNECTIONS", "0")
    with pytest.raises(UsageError, match=r"api\.max_connections"):
        load_config(None)
    monkeypatch.delenv("CACHESCOPE_MAX_CONNECTIONS")
    monkeypatch.setenv("CACHESCOPE_CORS_ORIGINS", "https://a.example")  # not JSON
    with pytest.raises(UsageError, match="CACHESCOPE_CORS_ORIGINS"):
        load_config(None)


def test_the_streaming_job_reads_its_section(tmp_path, monkeypatch):
    """flink-jobs/shadow_caches.py: the settings' flink section, its command-line options over it."""
    from runners.flink import job_options

    site = tmp_path / "site.yaml"
    site.write_text("flink: {bootstrap: 'kafka:9092', checkpoint_dir: 's3://ckpt', parallelism: 4}\n")
    monkeypatch.setenv("CACHESCOPE_FLINK__CLICKHOUSE", "clickhouse://ch:9000/cachescope")
    monkeypatch.setenv("CACHESCOPE_FLINK_JARS", "/opt/flink-jars")
    args, _ = job_options(["--config", str(site), "--parallelism", "2", "--bounded"])
    assert (args.bootstrap, args.clickhouse, args.checkpoint_dir) == ("kafka:9092", "clickhouse://ch:9000/cachescope",
                                                                      "s3://ckpt")
    assert (args.parallelism, args.bounded, args.flush_rows, args.jar_dir) == (2, True, 100_000, "/opt/flink-jars")


def test_the_streaming_job_says_which_option_is_missing():
    out = subprocess.run([sys.executable, str(REPO / "flink-jobs" / "shadow_caches.py"), "--bootstrap", "k:9092",
                          "--clickhouse", "clickhouse://ch:9000"], capture_output=True, text=True, cwd=REPO,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert out.returncode == 2
    assert "--checkpoint-dir is required" in out.stderr and "CACHESCOPE_FLINK__CHECKPOINT_DIR" in out.stderr
    assert "Traceback" not in out.stderr


def test_migrations_dir_comes_from_the_store_section(monkeypatch, tmp_path):
    from cachescope.store.migrations import migrations_dir

    monkeypatch.setenv("CACHESCOPE_MIGRATIONS_DIR", str(tmp_path))
    assert migrations_dir() == tmp_path
    monkeypatch.setenv("CACHESCOPE_STORE__MIGRATIONS_DIR", str(tmp_path / "new"))
    assert migrations_dir() == tmp_path / "new"
