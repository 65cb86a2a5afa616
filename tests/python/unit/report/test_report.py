"""`cachescope report`: plots and one self-contained HTML page from a store the real pipeline
filled (the hit-drop scenario, the site as one cache group and one group per server)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cachescope import report
from cachescope.config import load_config
from runners.embedded import replay
from cachescope.store import EmbeddedStore
from ingest.generate import make_workload, write
from ingest.scenarios import apply

CLI = str(Path(sys.executable).parent / "cachescope")


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    w, incident = apply("hit-drop", make_workload(30_000, days=2, sites=1, servers=2, seed=11))
    files = write("xrootd-gstream", w, tmp / "logs", single_file=False)
    site = {"site": w.sites[0], "pipeline": {"shadow": {"policies": ["lru", "xcache"], "sizes": ["2TB", "10TB"]},
                                             "curve": {"points": 12}},
            "alerts": {"defaults": False, "rules": [{"name": "hit-drop", "kind": "drop", "drop": 0.3, "over": "1h",
                                                     "for": "15m", "policy": "lru", "size": "10TB"}]}}
    servers = {"site": w.sites[0], "cache_groups": {"mode": "server"}, "alerts": {"defaults": False},
               "pipeline": {"shadow": {"policies": ["lru", "xcache"], "sizes": ["1TB", "5TB"]}, "curve": {"points": 12}}}
    store_dir = tmp / "store"
    store = EmbeddedStore(store_dir)
    for name, cfg in (("site.yaml", site), ("servers.yaml", servers)):
        (tmp / name).write_text(yaml.safe_dump(cfg))
        replay(files, "xrootd-gstream", config=load_config(tmp / name), store=store)
    store.close()
    return store_dir, incident


def test_report_writes_plots_and_one_self_contained_page(filled, tmp_path):
    store_dir, incident = filled
    out = tmp_path / "out"
    p = subprocess.run([CLI, "report", "--store", str(store_dir), "--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    pngs = sorted(f.name for f in out.glob("*.png"))
    assert pngs == ["ages.png", "alerts.png", "curves.png", "real.png", "split.png", "tiers.png"]
    for f in out.glob("*.png"):
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 5000
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 6
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from elsewhere
    assert "hit-drop" in page and incident.site in page


def test_report_sections_carry_their_numbers(filled):
    store_dir, incident = filled
    with EmbeddedStore(store_dir) as store:
        sections, start, end = report.build(store)
    by = {s.key: s for s in sections}
    curves = by["curves"].table
    site = curves[curves["cache group"] == incident.site]
    assert set(site["policy"]) == {"lru", "xcache", "belady"}
    assert set(site[site.policy == "belady"]["size"]) == set(site[site.policy == "lru"]["size"]) == {"2 TB", "10 TB"}
    assert site[["hit eff.", "transfer eff."]].apply(lambda c: c.between(0, 1)).all().all()
    split = by["split"].table
    assert len(split) == 4 and set(split["servers"]) == {2}  # 2 × 1TB = 2TB, 2 × 5TB = 10TB, two policies
    assert split["shared hit"].between(0, 1).all() and split["per-server hit"].between(0, 1).all()
    alerts = by["alerts"].table
    assert list(alerts["rule"]) == ["hit-drop"] and alerts["resolved"].iloc[0] != "firing"
    assert by["tiers"].table["reads"].sum() > 0 and len(by["real"].table) >= 1
    real = by["real"].table
    assert real["real hit eff."].between(0, 1).all()
    assert real[real["cache group"] == incident.site]["shadow hit eff."].between(0, 1).all()  # its own size
    ages = by["ages"].table  # every shadow cache of every group, ages within the data's span
    hours = (end - start).total_seconds() / 3600
    assert set(ages["cache group"]) >= {incident.site} and set(ages["policy"]) == {"lru", "xcache"}
    assert ages["mean file age (h)"].between(0, hours).all() and (ages["mean file age (h)"] > 0).any()
    evicting = ages[ages["evictions"] > 0]
    assert evicting["residence before eviction (h)"].between(0, hours).all()


def test_report_errors_are_one_line(tmp_path, filled):
    store_dir, _ = filled
    p = subprocess.run([CLI, "report", "--store", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    p = subprocess.run([CLI, "report", "--store", str(store_dir), "--clickhouse", "clickhouse://127.0.0.1:1",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert p.returncode == 2
    p = subprocess.run([CLI, "report", "--store", str(store_dir), "--from", "yesterday", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "ISO 8601" in p.stderr


def test_one_vs_n_is_replayed_when_the_pipeline_runs_one_grouping(tmp_path):
    """A site whose pipeline runs only the site-wide group still gets the one-vs-N comparison: its
    stored accesses replayed through one shared cache and one cache per server of equal total
    size. The shared replay agrees with the live shadow cache of the same policy and size."""
    import datetime as dt

    from cachescope import reads
    from cachescope.report import replayed_split, split_section

    w = make_workload(12_000, days=1, sites=1, servers=3, seed=23)
    files = write("xrootd-gstream", w, tmp_path / "logs", single_file=False)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({"site": w.sites[0], "alerts": {"defaults": False},
        "pipeline": {"shadow": {"policies": ["lru", "arc"], "sizes": ["2TB", "10TB"]}, "curve": {"points": 8}}}))
    store = EmbeddedStore(tmp_path / "store")
    try:
        replay(files, "xrootd-gstream", config=load_config(tmp_path / "site.yaml"), store=store)
        start, end = reads.time_span(store)
        section = split_section(store, start, end)
        assert len(section.table) == 4 and set(section.table["servers"]) == {3}
        assert any("Replayed" in n for n in section.notes)
        group = reads.cache_groups(store)["cache_group"].iloc[0]
        df, _ = replayed_split(store, start, end, group, [2 * 10**12, 10 * 10**12])
        live = reads.efficiency_totals(store, start, end, cache_groups=[group]).set_index(["policy", "size_bytes"])
        for r in df.itertuples():
            assert abs(r.shared_hit_efficiency - live.loc[(r.policy, r.total_size_bytes), "hit_efficiency"]) < 0.01
            assert 0 <= r.split_hit_efficiency <= 1
    finally:
        store.close()
