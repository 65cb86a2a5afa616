"""Delayed hits beside hits wherever the stored results are read (issue 36): a replay whose
`xcache` shadow has fetch times (the g-stream's attach..detach durations and an origin rate)
writes delayed hits into the efficiency rows, and /v1/efficiency (every table: minute, hour, day),
/v1/compare, `cachescope report` and a what-if of the same range and parameters all give the
same count. Hit efficiency stays hits / reads: a delayed hit is not a hit."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml

from cachescope.config import load_config
from runners.embedded import replay
from support.api import api_client

SIZE = "2TB"
#: 10 Mbit/s: accesses without a duration take their time from the origin link
ORIGIN_RATE = 1.25e6
XCACHE = {"origin_rate": ORIGIN_RATE, "block_size": 1048576.0}


START = 1_704_067_200  # 2024-01-01T00:00:00Z
FILES = 24
#: per file, a job burst: the reads' offsets from the first (s) and how long each lasted (s). The
#: first fetches the whole file over 120 s; the three that open while it is in flight wait for its
#: blocks (delayed hits: no fetch of their own); the last finds it on disk (a hit)
BURST = [(0, 120), (3, 30), (8, 30), (20, 30), (400, 30)]


def _gstream(path: Path) -> Path:
    """An XCache's g-stream of FILES job bursts (10 minutes apart), its records in attach order:
    the order the processing core reads them in is then the what-if's (ts, origin, seq) order."""
    lines = [orjson.dumps({"code": "g", "pseq": 0, "stod": START, "src": {
        "site": "MWT2", "host": "xcache00.mwt2.org", "port": 1094, "inst": "xcache"},
        "gs": {"type": "C", "tbeg": START, "tend": START + 86400}}).decode()]
    for k in range(FILES):
        size = (1 + k % 4) * 10**9
        lfn = f"atlas/rucio/mc16_13TeV/4e/c3/{('AOD', 'HITS')[k % 2]}.1964406{k % 10}._{k:06d}.pool.root.1"
        blocks = -(-size // 1048576)
        for i, (at, took) in enumerate(BURST):
            t = START + 600 * k + at
            miss = size if i == 0 else 0
            lines.append(orjson.dumps({
                "event": "file_close", "lfn": lfn, "size": size, "blk_size": 1048576, "n_blks": blocks,
                "n_blks_done": blocks, "access_cnt": 1, "attach_t": t, "detach_t": t + took,
                "remotes": ["origin.mwt2.org:1094"] if miss else [], "b_hit": size - miss, "b_miss": miss,
                "b_bypass": 0, "b_todisk": miss, "b_prefetch": 0, "n_cks_errs": 0}).decode())
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from cachescope.store import EmbeddedStore

    tmp = tmp_path_factory.mktemp("delayed")
    files = [_gstream(tmp / "gstream.log")]
    (tmp / "site.yaml").write_text(yaml.safe_dump({"site": "MWT2", "pipeline": {
        "shadow": {"policies": ["xcache", "lru"], "sizes": [SIZE], "params": {"xcache": XCACHE}},
        "curve": {"points": 8}}}))
    store = EmbeddedStore(tmp / "store")
    try:
        replay(files, "xrootd-gstream", config=load_config(tmp / "site.yaml"), store=store)
    finally:
        store.close()
    return tmp / "store"


@pytest.fixture(scope="module")
def client(data):
    with api_client(store_dir=data) as c:
        yield c


def _get(client, path: str, **params) -> dict:
    r = client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def span(client) -> dict:
    """The range of the stored results in whole hours, and its one cache group."""
    configs = _get(client, "/v1/configs")
    (group,) = [g["cache_group"] for g in configs["cache_groups"]]
    ans = _get(client, "/v1/efficiency", cache_group=group, step="1h")
    t0 = dt.datetime.fromisoformat(ans["from"]).replace(minute=0, second=0, microsecond=0)
    t1 = dt.datetime.fromisoformat(ans["to"]).replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
    return {"group": group, "from": t0.isoformat(), "to": t1.isoformat()}


def _series_sums(client, span, step: str) -> dict[str, dict[str, int]]:
    ans = _get(client, "/v1/efficiency", cache_group=span["group"], step=step, **{"from": span["from"], "to": span["to"]})
    out = {}
    for s in ans["series"]:
        # hit efficiency is hits / reads in every bucket: the delayed hits are beside it, not in it
        for r, h, e in zip(s["requests"], s["hits"], s["hit_efficiency"]):
            assert (e is None and r == 0) or math.isclose(e, h / r, rel_tol=1e-12)
        assert all(h + d <= r for h, d, r in zip(s["hits"], s["delayed_hits"], s["requests"]))
        out[s["policy"]] = {k: sum(s[k]) for k in ("requests", "hits", "delayed_hits", "bytes_hit", "bytes_delayed")}
    return out


@pytest.fixture(scope="module")
def stored(client, span) -> dict[str, dict[str, int]]:
    return _series_sums(client, span, "1h")


def test_efficiency_series_carry_delayed_hits_in_every_table(client, span, stored):
    xc = stored["xcache"]
    # every burst: one miss, three delayed hits, one hit
    assert (xc["requests"], xc["hits"], xc["delayed_hits"]) == (FILES * len(BURST), FILES, 3 * FILES), xc
    assert xc["bytes_delayed"] > 0
    # libCacheSim's semantics for the other policies: fetches are instant
    assert stored["lru"]["delayed_hits"] == stored["lru"]["bytes_delayed"] == 0
    # the minute table (the read layer's SQL) and the day table (the in-process copy) add up the same
    for step in ("1m", "1d"):
        assert _series_sums(client, span, step) == stored, step


def test_whatif_of_the_same_range_and_parameters_counts_the_same_delayed_hits(client, span, stored):
    r = client.post("/v1/whatif", json={"policy": "xcache", "size": SIZE, "from": span["from"], "to": span["to"],
                                        "cache_group": span["group"], "params": {"xcache": XCACHE}})
    assert r.status_code == 200, r.text
    ans = r.json()
    xc = stored["xcache"]
    assert (ans["requests"], ans["hits"], ans["delayed_hits"], ans["bytes_delayed"]) == \
        (xc["requests"], xc["hits"], xc["delayed_hits"], xc["bytes_delayed"])
    assert ans["hit_ratio"] == pytest.approx(xc["hits"] / xc["requests"], rel=1e-12)
    assert ans["misses"] == ans["requests"] - ans["hits"] - ans["delayed_hits"]


def test_compare_gives_each_shadows_delayed_hits(client, span, stored):
    ans = _get(client, "/v1/compare", cache_group=span["group"], size=SIZE, step="1h",
               **{"from": span["from"], "to": span["to"]})
    assert ans["source"]["xcache"] == "stored"
    assert ans["overall"]["shadow_delayed_hits"] == {p: v["delayed_hits"] for p, v in stored.items()}
    assert sum(w["shadow_delayed_hits"].get("xcache", 0) for w in ans["windows"]) == stored["xcache"]["delayed_hits"]
    xc = stored["xcache"]
    assert ans["overall"]["shadow_hit_efficiency"]["xcache"] == pytest.approx(xc["hits"] / xc["requests"], rel=1e-12)


def test_report_shows_delayed_hits_beside_hits(client, span, stored, tmp_path):
    from cachescope import report

    with client.app.state.stores.get() as store:  # the served store (chDB: one session per process)
        sections, start, end = report.build(store, dt.datetime.fromisoformat(span["from"]),
                                            dt.datetime.fromisoformat(span["to"]))
        page = report.write(sections, start, end, tmp_path / "report")
    by = {s.key: s for s in sections}
    curves = by["curves"].table
    live = curves[curves["policy"].isin(["xcache", "lru"])].set_index("policy")["delayed hits"].to_dict()
    assert live == {p: v["delayed_hits"] for p, v in stored.items()}
    # the tier table is of the reference cache (xcache here) summed over the cache groups, each read once:
    # the site's server group (pipeline.server_caches) sees the same reads and stays out of the sum
    every = _get(client, "/v1/efficiency", step="1h", policy="xcache", size=SIZE,
                 **{"from": span["from"], "to": span["to"]})["series"]
    assert len(every) == 2 and all(sum(s["delayed_hits"]) == stored["xcache"]["delayed_hits"] for s in every)
    assert int(np.sum(by["tiers"].table["delayed hits"])) == stored["xcache"]["delayed_hits"]
    assert by["real"].table["shadow delayed hits"].tolist() == [stored["xcache"]["delayed_hits"]]
    assert "delayed hits" in page.read_text()


def test_rows_of_a_store_from_before_the_columns_read_zero_delayed_hits(data):
    """Rows written before migration 0015 (no delayed-hit columns) read 0 delayed hits, in the
    answers of /v1/efficiency from the read layer's SQL (minute step) and from the in-process copy
    (hour step). A database of its own in the served store's directory (chDB: one per process)."""
    import shutil
    import tempfile

    from api import series_index
    from api.routes.efficiency import columnar_series
    from cachescope import reads
    from cachescope.store import EmbeddedStore, migrations as mig, tables

    store = EmbeddedStore(data, database="before_0015")
    try:
        with tempfile.TemporaryDirectory() as old:
            for m in mig.discover():
                if m.version < 15:
                    shutil.copy(m.path, Path(old) / m.path.name)
            mig.migrate(store, events_ttl_days=0, directory=Path(old))
        assert "delayed_hits" not in store.schema(tables.EFFICIENCY)
        w = np.datetime64("2024-05-01T00:00", "s") + np.arange(120).astype("timedelta64[m]")
        for table, starts, length in ((tables.EFFICIENCY, w, np.timedelta64(1, "m")),
                                      (tables.EFFICIENCY_HOURLY, w[::60], np.timedelta64(1, "h"))):
            n = len(starts)
            per = 1 if table == tables.EFFICIENCY else 60
            store.insert(table, {
                "window_start": starts, "window_end": starts + length, "cache_group": ["g"] * n,
                "policy": ["xcache"] * n, "size_bytes": np.full(n, 10**12, dtype=np.uint64), "tier": ["AOD"] * n,
                "sample_rate": np.ones(n), "partitions": np.ones(n, dtype=np.uint32),
                **{c: np.full(n, v * per, dtype=np.uint64) for c, v in (
                    ("requests", 3), ("hits", 1), ("bytes_requested", 30), ("bytes_hit", 10), ("bytes_filled", 20),
                    ("evictions", 0), ("bytes_evicted", 0))}})
        mig.migrate(store, events_ttl_days=0)
        assert "delayed_hits" in store.schema(tables.EFFICIENCY)
        t0 = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
        t1 = t0 + dt.timedelta(hours=2)
        (sql,) = columnar_series(reads.efficiency_series(store, t0, t1, 60, cache_groups=["g"]))
        rows, names = reads.efficiency_rows(store, tables.EFFICIENCY_HOURLY)
        copy = series_index.TableCopy(rows, reads.table_version(store, tables.EFFICIENCY_HOURLY), names)
        (hourly,) = orjson.loads(series_index.dumps(copy.series_json(t0, t1, 3600, cache_groups=["g"])))
    finally:
        store.close()
    for s, n in ((sql, 120), (hourly, 2)):
        assert sum(s["requests"]) == 360 and sum(s["hits"]) == 120
        assert s["delayed_hits"] == [0] * n and s["bytes_delayed"] == [0] * n
