"""The read layer on both backends, on rows written by the real embedded pipeline."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cachescope import reads
from cachescope.config import load_config
from runners.embedded import replay

CLI = Path(sys.executable).parent / "cachescope"


@pytest.fixture(scope="module")
def gstream_logs(tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("logs")
    subprocess.run([str(CLI), "generate", "--out", str(out), "-f", "xrootd-gstream", "-n", "8000", "--days", "0.5",
                    "--seed", "3"], check=True, capture_output=True)
    return sorted(p for p in out.rglob("*") if p.is_file())


@pytest.fixture
def filled(store, gstream_logs):
    summary = replay(gstream_logs, "xrootd-gstream", config=load_config(), store=store)
    assert summary.events > 4000
    return store, summary


def test_every_resolution_and_the_totals_agree_with_the_replay(filled):
    store, summary = filled
    first, last = reads.time_span(store)
    want = summary.efficiency.set_index(["cache_group", "policy", "size_bytes"])[["requests", "hits", "bytes_hit"]]
    groups = list(summary.efficiency["cache_group"].unique())  # the summary's: not the per-server caches
    for step in (60, 300, 3600, 86400):
        got = reads.efficiency_series(store, first, last, step, cache_groups=groups).groupby(
            ["cache_group", "policy", "size_bytes"])[["requests", "hits", "bytes_hit"]].sum()
        assert (got.sort_index().to_numpy() == want.sort_index().to_numpy()).all(), step
    tot = reads.efficiency_totals(store, first, last, cache_groups=groups).set_index(["cache_group", "policy",
                                                                                     "size_bytes"])
    assert (tot[["requests", "hits", "bytes_hit"]].sort_index().to_numpy() == want.sort_index().to_numpy()).all()
    by_tier = reads.efficiency_totals(store, first, last, by_tier=True, cache_groups=groups)
    assert len(set(by_tier["tier_key"])) > 1 and "ALL" not in set(by_tier["tier_key"])
    assert by_tier["requests"].sum() == tot["requests"].sum()
    e = tot["hit_efficiency"]
    assert ((e >= 0) & (e <= 1)).all()


def test_filters_curves_real_cache_and_whatif_read(filled):
    store, summary = filled
    first, last = reads.time_span(store)
    group = summary.efficiency["cache_group"].iloc[0]
    one = reads.efficiency_series(store, first, last, 3600, cache_groups=[group], policies=["arc"], tiers=[])
    assert set(one["cache_group"]) == {group} and set(one["policy"]) == {"arc"}
    curve = reads.mrc(store, first, last, cache_groups=[group])
    assert len(curve) == 64 and curve["hit_efficiency"].is_monotonic_increasing
    real = reads.observed_series(store, first, last, 3600, cache_groups=[group])
    assert len(real) and (real["transfer_efficiency"].dropna().between(0, 1)).all()
    assert len(reads.observed_servers(store, first, last)) >= 2
    acc = reads.whatif_accesses(store, first, last, cache_groups=[group])
    assert len(acc) == reads.access_count(store, first, last, cache_groups=[group]) > 0
    key = list(zip(acc["ts_us"].tolist(), acc["origin"].tolist(), acc["seq"].tolist()))
    assert key == sorted(key)
    assert acc["file_id"].dtype == np.uint64 and set(acc["op_code"].unique()) <= {0, 1, 2}
    configs = reads.live_configs(store)
    groups = set(summary.efficiency["cache_group"])
    assert len(configs[configs.cache_group.isin(groups)]) == len(summary.efficiency)
    # and each group's per-server caches (pipeline.server_caches: its first policy, at its sizes)
    per_server = configs[~configs.cache_group.isin(groups)]
    assert len(per_server) and all(g.split("/", 1)[0] in groups for g in per_server.cache_group)
    assert len(reads.cache_groups(store)) == summary.efficiency["cache_group"].nunique()
    health = reads.pipeline_health(store, dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1), 3600)
    assert {"events_in", "rows_written"} <= set(health["metric"])


def test_values_are_parameters_never_sql(filled):
    store, _ = filled
    first, last = reads.time_span(store)
    hostile = ["x' OR 1=1 --", "'; DROP TABLE efficiency; --"]
    assert len(reads.efficiency_series(store, first, last, 3600, cache_groups=hostile)) == 0
    assert len(reads.efficiency_series(store, first, last, 3600)) > 0  # the table is still there
    for q in reads.ALL:
        assert "'" not in re.sub(r"'[A-Za-z0-9_ ]*'", "", q.sql.replace("\\'", "")), q.name  # only fixed literals


def test_grafana_rendering_replaces_every_parameter():
    bindings = {"start": "$__fromTime", "end": "$__toTime", "step_s": "$__interval_s", "by_tier": "1",
                "cache_groups": "[${cache_group:singlequote}]", "policies": "[${policy:singlequote}]",
                "sizes": "[${size:csv}]", "tiers": "[${tier:singlequote}]", "metrics": "[]",
                "site": "'${site}'", "sites": "['${site}']", "window_s": "60", "states": "['firing']",
                "baseline_days": "7", "exclude_tiers": "[]", "max_file_size": "0", "tier_names": "[]", "servers": "[]",
                "consumer_groups": "[]", "group_names": "[]", "policy_names": "[]"}
    for q in reads.ALL:
        sql = q.grafana(bindings)
        assert "{" not in sql.replace("${", "").replace("{{", ""), q.name
    with pytest.raises(KeyError, match="no Grafana binding"):
        reads.MRC.grafana({})


def test_residence_ages_add_up_at_every_resolution(filled):
    """Ages are sums like every counter: minute, hour and day reads agree, every shadow cache has
    them, and the means are plausible (older than 0, younger than the data's span)."""
    store, summary = filled
    first, last = reads.time_span(store)
    span_s = (last - first).total_seconds()
    keys = ["cache_group", "policy", "size_bytes"]
    cols = ["age_reads", "resident_age_s", "evictions", "evicted_age_s"]
    sums = [reads.residence_series(store, first, last, step).groupby(keys)[cols].sum().sort_index()
            for step in (60, 3600, 86400)]
    for other in sums[1:]:
        assert (other.to_numpy() == sums[0].to_numpy()).all()
    # the summary's groups (the per-server caches add up alike, above, and have no summary row)
    per_cache = sums[0][sums[0].index.get_level_values("cache_group").isin(set(summary.efficiency["cache_group"]))]
    want = summary.efficiency.set_index(keys).sort_index()
    assert len(per_cache) == len(want)
    assert (per_cache["age_reads"].to_numpy() == want["requests"].to_numpy()).all()  # every read samples the age
    assert (per_cache["resident_age_s"] > 0).all()
    mean_age = per_cache["resident_age_s"] / per_cache["age_reads"]
    assert ((mean_age > 0) & (mean_age < span_s)).all()
    evicting = per_cache[per_cache["evictions"] > 0]
    assert len(evicting) and (evicting["evicted_age_s"] > 0).all()
    assert ((evicting["evicted_age_s"] / evicting["evictions"]) < span_s).all()
    series = reads.residence_series(store, first, last, 3600)
    assert series["mean_age_s"].notna().any() and series["residence_s"].notna().any()


def test_the_real_cache_hits_are_its_accesses_with_nothing_fetched_from_the_origin(filled):
    store, _ = filled
    first, last = reads.time_span(store)
    real = reads.observed_series(store, first, last, 3600)
    assert real["hits"].sum() > 0 and (real["hits"] <= real["accesses"]).all()
    e = real["hit_efficiency"].dropna()
    assert len(e) and ((e >= 0) & (e <= 1)).all()
    # the same count straight from the stored accesses (the cache's verdict; its bytes where it has none)
    direct = store.query_frame(
        "SELECT countIf(if(observed_hit IS NULL, observed_hit_bytes > 0 AND ifNull(observed_miss_bytes, 0) = 0 AND "
        "ifNull(observed_bypass_bytes, 0) = 0, observed_hit = 1)) AS hits, countIf(observed_hit IS NOT NULL) AS "
        "verdicts, count() AS accesses FROM access_events FINAL "
        "WHERE op = 'read' AND (observed_hit_bytes IS NOT NULL OR observed_miss_bytes IS NOT NULL)", {})
    assert int(direct["hits"].iloc[0]) == int(real["hits"].sum())
    assert int(direct["verdicts"].iloc[0]) == int(direct["accesses"].iloc[0])  # the generator's records say
    assert int(direct["accesses"].iloc[0]) == int(real["accesses"].sum())


def test_parse_health_of_a_replay(filled):
    store, summary = filled
    df = reads.parse_health(store, dt.datetime(2000, 1, 1), dt.datetime(2100, 1, 1), 86400)
    got = df[df["component"] == "parse"].groupby("metric")["value"].sum()
    assert got["events"] == summary.events and got["lines"] >= got["events"]
    reasons = sum(v for k, v in got.items() if ":" in k)
    assert reasons == got.get("rejected", 0) + got.get("skipped", 0)
