"""The REST API (api/) over stores written by the real pipeline, checked against `cachescope simulate`.

chDB: the store is written by `cachescope replay` (subprocess). ClickHouse server: the same core
through the embedded runner's GroupState path (`runners.embedded.replay(..., store=server_store)`),
since the Flink job is slow to start; the API reads both through the read layer alike.
The ClickHouse-server tests are tests/python/integration/api/test_api_server.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest

CLI = str(Path(sys.executable).parent / "cachescope")
T0 = 1_700_000_000  # 2023-11-14T22:13:20Z
UTC = dt.timezone.utc
FROM = "2023-11-14T00:00:00Z"
TO = "2023-11-18T00:00:00Z"
POLICIES = ["lru", "arc", "belady"]
SIZES = ["200GB", "1TB"]
SIZE_BYTES = [200 * 10**9, 10**12]
TIERS = ["AOD", "HITS", "USER"]


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, **kw)


def write_trace(path: Path, n: int, seed: int, t_step: int = 30, files: int = 500) -> list[tuple]:
    """A csv trace over ~2 days (day chunks of the what-if are crossed): zipf reuse, partial reads."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.3, n) - 1, files - 1)
    sizes = (1 + (np.arange(files) * 7919) % 40) * 10**9
    rows = []
    for i, f in enumerate(ranks.tolist()):
        size = int(sizes[f])
        rows.append((T0 + i * t_step, seed * 100_000 + f + 1, size, TIERS[f % 3], f"/store/{seed}/f{f}",
                     size if i % 3 else size // 2))
    write_rows(path, rows)
    return rows


def write_rows(path: Path, rows: list[tuple]) -> None:
    path.write_text("timestamp,obj_id,obj_size,tier,path,bytes_read\n"
                    + "".join(",".join(map(str, r)) + "\n" for r in rows))


def simulate(trace: Path, *extra: str, policies=POLICIES, sizes=SIZES) -> dict:
    out = run("simulate", str(trace), "--policy", ",".join(policies), "--size", ",".join(sizes), "--json", *extra)
    assert out.returncode == 0, out.stderr
    return {(r["policy"], r["size_bytes"]): r for r in map(orjson.loads, out.stdout.splitlines())}


FIELDS = ("requests", "hits", "bytes_requested", "bytes_hit")


def same(answer: dict, want: dict) -> None:
    assert tuple(answer[f] for f in FIELDS) == tuple(want[f] for f in FIELDS), (answer, want)
    assert {t: tuple(v[f] for f in FIELDS) for t, v in answer["by_tier"].items()} == \
        {t: tuple(v[f] for f in FIELDS) for t, v in want["by_tier"].items()}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two sites' traces, replayed into one chDB store (one cache group per site)."""
    d = tmp_path_factory.mktemp("api")
    a = write_trace(d / "a.csv", 6000, seed=1)
    b = write_trace(d / "b.csv", 3000, seed=2, t_step=55)
    store = d / "store"
    for name, site in (("a.csv", "SITE-A"), ("b.csv", "SITE-B")):
        out = run("replay", "--format", "csv", "--site", site, "--store", str(store), str(d / name))
        assert out.returncode == 0, out.stderr
    return {"dir": d, "store": store, "a": a, "b": b}


@pytest.fixture(scope="module")
def client(data):
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app

    with TestClient(create_app(Settings(store_dir=data["store"]))) as c:
        yield c


def whatif(client, **body) -> dict:
    r = client.post("/v1/whatif", json={"from": FROM, "to": TO, **body})
    assert r.status_code == 200, r.text
    return r.json()


# ------------------------------------------------------------------------------------------ what-if

def test_whatif_equals_simulate_for_every_policy_and_size(client, data):
    want = simulate(data["dir"] / "a.csv")
    got = whatif(client, policy=POLICIES, size=SIZES, cache_group="SITE-A")
    assert len(got["results"]) == len(POLICIES) * len(SIZES)
    for r in got["results"]:
        same(r, want[(r["policy"], r["size_bytes"])])
    assert got["accesses"] == 6000
    # the single form answers flat, sizes as strings, binary units or plain integers alike
    flat = whatif(client, policy="arc", size=10**12, cache_group="SITE-A")
    same(flat, want[("arc", 10**12)])
    assert whatif(client, policy="arc", size="1000000000000", cache_group="SITE-A")["hits"] == flat["hits"]
    tib = simulate(data["dir"] / "a.csv", policies=["lru"], sizes=["1TiB"])
    same(whatif(client, policy="lru", size="1TiB", cache_group="SITE-A"), tib[("lru", 2**40)])


def test_whatif_command_answers_as_the_route_does(data, tmp_path):
    # `cachescope whatif --json`: one object per (policy, size), the route's answer, no server (a
    # store of its own, and the route asked of `cachescope serve`: chDB opens one store per process)
    store = tmp_path / "store"
    out = run("replay", "--format", "csv", "--site", "SITE-A", "--store", str(store), str(data["dir"] / "a.csv"))
    assert out.returncode == 0, out.stderr
    args = ["whatif", "--store", str(store), "--policy", "lru,arc", "--size", ",".join(SIZES),
            "--from", FROM, "--to", TO, "--cache-group", "SITE-A", "--warmup", "1d"]
    out = run(*args, "--json")
    assert out.returncode == 0, out.stderr
    got = [orjson.loads(line) for line in out.stdout.splitlines()]
    table = run(*args)  # the table names the metrics in the field's words
    assert table.returncode == 0 and "hit efficiency" in table.stdout and "transfer efficiency" in table.stdout
    # one line and exit 1 for a group the store does not hold, 2 for bad usage
    bad = run(*args[:-4], "--cache-group", "NOPE")
    assert bad.returncode == 1 and "NOPE" in bad.stderr and "SITE-A" in bad.stderr and len(bad.stderr.splitlines()) == 1
    usage = run("whatif", "--store", str(store), "--policy", "lru", "--size", "1TB", "--from", TO, "--to", FROM)
    assert usage.returncode == 2 and "--to" in usage.stderr and "Traceback" not in usage.stderr
    proc, port = start_serve(store)
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/v1/whatif", timeout=600, json={
            "policy": ["lru", "arc"], "size": SIZES, "from": FROM, "to": TO, "cache_group": "SITE-A", "warmup": "P1D"})
    finally:
        proc.terminate()
        proc.communicate()
    assert r.status_code == 200, r.text
    route = r.json()["results"]
    assert [(g["policy"], g["size_bytes"]) for g in got] == [(r["policy"], r["size_bytes"]) for r in route]
    for g, r in zip(got, route):
        same(g, r)
        assert g["hit_ratio"] == r["hit_ratio"] and g["byte_hit_ratio"] == r["byte_hit_ratio"]
    assert sum(g["requests"] for g in got) > 0


def test_warmup_feeds_the_cache_but_is_not_counted(client, data):
    rows = data["a"]
    cut = rows[len(rows) // 2][0]  # a timestamp half-way
    prefix = [r for r in rows if r[0] < cut]
    write_rows(data["dir"] / "prefix.csv", prefix)
    whole = simulate(data["dir"] / "a.csv", policies=["lru", "arc"])
    before = simulate(data["dir"] / "prefix.csv", policies=["lru", "arc"])
    start = dt.datetime.fromtimestamp(cut, UTC).isoformat()
    got = whatif(client, policy=["lru", "arc"], size=SIZES, cache_group="SITE-A", warmup="P2D", **{"from": start})
    for r in got["results"]:
        w, b = whole[(r["policy"], r["size_bytes"])], before[(r["policy"], r["size_bytes"])]
        assert tuple(r[f] for f in FIELDS) == tuple(w[f] - b[f] for f in FIELDS)
    assert got["accesses"] == len(rows) - len(prefix) and got["warmup_accesses"] == len(prefix)


def test_admission_filter_counts_excluded_reads_as_misses_never_inserted(client, data):
    rows = data["a"]
    big = 30 * 10**9
    kept = [r for r in rows if r[3] != "USER" and r[2] <= big]
    write_rows(data["dir"] / "admitted.csv", kept)
    want = simulate(data["dir"] / "admitted.csv", policies=["lru"])
    got = whatif(client, policy="lru", size=["200GB", "1TB"], cache_group="SITE-A",
                 admission={"exclude_tiers": ["USER"], "max_file_size": "30GB"})
    for r in got["results"]:
        w = want[("lru", r["size_bytes"])]
        excluded = [x for x in rows if not (x[3] != "USER" and x[2] <= big)]
        assert r["requests"] == len(rows) and r["hits"] == w["hits"] and r["bytes_hit"] == w["bytes_hit"]
        assert r["bytes_requested"] == w["bytes_requested"] + sum(x[5] for x in excluded)
        assert r["by_tier"]["USER"]["hits"] == 0 and r["by_tier"]["USER"]["requests"] == sum(x[3] == "USER" for x in rows)


def test_several_groups_merge_in_replay_order_with_the_split_by_group(client, data):
    from cachescope.replay import WhatIf, run_whatif  # noqa: F401  (the library the route runs)
    from cachescope import reads

    # the same accesses the store holds, in (ts, origin, seq) order, as a simulator trace
    store = client.app.state.stores._all[0]
    df = reads.whatif_accesses(store, dt.datetime(2023, 11, 14, tzinfo=UTC), dt.datetime(2023, 11, 18, tzinfo=UTC),
                               cache_groups=["SITE-A", "SITE-B"])
    assert len(df) == 9000
    write_rows(data["dir"] / "merged.csv", list(zip(df["ts_us"] // 10**6, df["file_id"], df["file_size"], df["tier"],
                                                    ["/p"] * len(df), df["bytes_read"])))
    want = simulate(data["dir"] / "merged.csv", policies=["lru", "s3fifo"])
    got = whatif(client, policy=["lru", "s3fifo"], size=SIZES, cache_group=["SITE-A", "SITE-B"])
    for r in got["results"]:
        same(r, want[(r["policy"], r["size_bytes"])])
        split = r["by_cache_group"]
        assert split["SITE-A"]["requests"] == 6000 and split["SITE-B"]["requests"] == 3000
        for f in FIELDS:
            assert split["SITE-A"][f] + split["SITE-B"][f] == r[f]
    # and the site filter picks one group's accesses
    one = whatif(client, policy="lru", size="1TB", site="SITE-B")
    assert one["requests"] == 3000


def test_partitions_answer_beside_one_shared_cache_and_sampling_states_its_bound(client, data):
    part = simulate(data["dir"] / "a.csv", "--partitions", "4", policies=["lru"], sizes=["1TB"])
    shared = simulate(data["dir"] / "a.csv", policies=["lru"], sizes=["1TB"])
    got = whatif(client, policy="lru", size="1TB", cache_group="SITE-A", partitions=4)
    same(got, part[("lru", 10**12)])
    assert got["partitions"] == 4
    assert tuple(got["shared"][f] for f in FIELDS) == tuple(shared[("lru", 10**12)][f] for f in FIELDS)

    sampled = simulate(data["dir"] / "a.csv", "--sample-rate", "0.25", policies=["lru"], sizes=["1TB"])[("lru", 10**12)]
    got = whatif(client, policy="lru", size="1TB", cache_group="SITE-A", sample_rate=0.25)
    s = got["sampling"]
    assert s["sampled_requests"] == sampled["requests"] and got["hit_ratio"] == sampled["hit_ratio"]
    assert got["requests"] == round(sampled["requests"] / 0.25)
    assert s["hit_ratio_error_bound"] >= 0 and "independent samples" in s["error_bound_method"]


def test_series_by_step_adds_up_to_the_total(client):
    got = whatif(client, policy="arc", size="1TB", cache_group="SITE-A", step="6h")
    assert len(got["series"]) > 4
    for f in FIELDS:
        assert sum(p[f] for p in got["series"]) == got[f]


# ------------------------------------------------------------------------------------------ reads

def test_efficiency_series_come_from_the_table_of_the_step(client):
    day = client.get("/v1/efficiency", params={"step": "1d", "cache_group": "SITE-A", "policy": "lru", "size": "1TB",
                                                "from": FROM, "to": TO}).json()
    hour = client.get("/v1/efficiency", params={"step": "1h", "cache_group": "SITE-A", "policy": "lru", "size": "1TB",
                                                 "from": FROM, "to": TO}).json()
    assert day["table"] == "efficiency_daily" and hour["table"] == "efficiency_hourly"
    assert len(day["series"]) == len(hour["series"]) == 1
    assert sum(day["series"][0]["hits"]) == sum(hour["series"][0]["hits"]) > 0
    # the live pipeline ran the default caches over the same accesses: equal to a what-if of them
    w = whatif(client, policy="lru", size="1TB", cache_group="SITE-A")
    assert sum(hour["series"][0]["requests"]) == w["requests"] and sum(hour["series"][0]["hits"]) == w["hits"]
    tiers = client.get("/v1/efficiency", params={"step": "1h", "cache_group": "SITE-A", "policy": "lru", "size": "1TB",
                                                  "by_tier": "true", "from": FROM, "to": TO}).json()
    assert {s["tier"] for s in tiers["series"]} == set(TIERS)


#: /v1/efficiency queries at hour and day steps: filters, odd bounds, a table each step picks
COPY_QUERIES = [
    {"step": "1h", "from": FROM, "to": TO},
    {"step": "1h", "from": FROM, "to": TO, "by_tier": "true"},
    {"step": "2h", "from": "2023-11-14T23:00:00.5Z", "to": "2023-11-16T05:00:00.000001Z", "policy": "lru,arc"},
    {"step": "3h", "from": FROM, "to": TO, "size": "1TB", "tier": "HITS,USER"},
    {"step": "1h", "from": FROM, "to": TO, "tier": "AOD", "policy": "lru"},
    {"step": "1d", "from": FROM, "to": TO, "by_tier": "true"},
    {"step": "7d", "from": "2023-11-01T00:00:00Z", "to": "2023-12-01T00:00:00Z"},
    {"step": "1h", "from": FROM, "to": TO, "policy": "lru", "size": "7"},
    {"step": "1h", "from": "2030-01-01T00:00:00Z", "to": "2030-01-02T00:00:00Z"},
]


def copy_and_sql_apps(app, **settings):
    """Two apps on `app`'s open stores: /v1/efficiency from the table copy, and by SQL per request
    (the read layer); no answer cache. Used without their lifespan: they borrow the stores."""
    from fastapi.testclient import TestClient

    from api.main import create_app

    out = []
    for rows in (1_000_000, 0):
        a = create_app(app.state.settings.model_copy(update={"series_copy_max_rows": rows, "answer_cache_seconds": 0,
                                                              **settings}))
        a.state.stores = app.state.stores
        out.append(TestClient(a))
    return out


def assert_copy_equals_sql(copy, sql, queries, headers=None) -> int:
    """Every query answers the same through the copy and through the read layer; returns the points."""
    points = 0
    for q in queries:
        a, b = copy.get("/v1/efficiency", params=q, headers=headers), sql.get("/v1/efficiency", params=q, headers=headers)
        assert a.status_code == b.status_code == 200, (q, a.text, b.text)
        assert a.json() == b.json(), q
        points += sum(len(s["time"]) for s in a.json()["series"])
    return points


def test_efficiency_copy_answers_as_the_read_layer_and_follows_the_table(client):
    """The in-process copy of the hour/day tables (api/series_index.py) answers every filter as the
    read layer does (FINAL, sums over shards and runs), and reloads when the table changes."""
    from cachescope.store import tables

    copy, sql = copy_and_sql_apps(client.app, series_copy_check_seconds=3600)
    assert assert_copy_equals_sql(copy, sql, COPY_QUERIES) > 100
    # a cache group the store holds nothing of: the same 422 on both paths (test_api_bounds.py)
    nope = {"step": "1h", "from": FROM, "to": TO, "cache_group": "nope"}
    a, b = copy.get("/v1/efficiency", params=nope), sql.get("/v1/efficiency", params=nope)
    assert a.status_code == b.status_code == 422 and a.json() == b.json() and a.json()["field"] == "cache_group"
    index = copy.app.state.series
    assert index.loads == 2  # hourly and daily, once each (then answered on the event loop)
    with client.app.state.stores.get() as store:
        row = store.query(f"SELECT * FROM {tables.EFFICIENCY_HOURLY} FINAL WHERE cache_group = 'SITE-A' "
                          "AND policy = 'lru' ORDER BY window_start LIMIT 1").dicts()[0]
        extra = [dict(row),  # a second copy of a row: FINAL keeps one
                 {**row, "cache_group": "COPY-TEST", "run": 1}, {**row, "cache_group": "COPY-TEST", "run": 2},
                 {**row, "cache_group": "COPY-TEST", "run": 2, "shard": 1, "hits": 0}]
        store.insert(tables.EFFICIENCY_HOURLY, {k: [r[k] for r in extra] for k in row})
    index.check_seconds = 0  # look at the table before each answer
    queries = COPY_QUERIES + [{"step": "1h", "from": FROM, "to": TO, "cache_group": "COPY-TEST", "by_tier": "true"}]
    assert assert_copy_equals_sql(copy, sql, queries) > 100
    assert index.loads == 3
    got = copy.get("/v1/efficiency", params=queries[-1]).json()["series"]
    assert [s["requests"] for s in got] == [[3 * row["requests"]]] and got[0]["hits"] == [2 * row["hits"]]


def test_mrc_configs_compare_recommend_alerts_health(client):
    h = client.get("/healthz")
    assert h.status_code == 200 and h.json()["backend"] == "embedded"
    m = client.get("/v1/mrc", params={"cache_group": "SITE-A", "by_tier": True, "from": FROM, "to": TO}).json()
    assert set(m["curves"]) == {"ALL", *TIERS}
    ratios = [p["hit_ratio"] for p in m["curves"]["ALL"]]
    assert ratios == sorted(ratios)  # LRU's inclusion property
    c = client.get("/v1/configs").json()
    assert {g["cache_group"] for g in c["cache_groups"]} == {"SITE-A", "SITE-B"} and c["configs"]
    cmp = client.get("/v1/compare", params={"cache_group": "SITE-A", "size": "1TB", "from": FROM, "to": TO}).json()
    assert cmp["source"]["xcache"] == "whatif" and cmp["source"]["lru"] == "stored"
    lru = whatif(client, policy="lru", size="1TB", cache_group="SITE-A")
    assert cmp["overall"]["shadow"]["lru"] == pytest.approx(lru["byte_hit_ratio"])
    assert cmp["overall"]["shadow_hit_efficiency"]["lru"] == pytest.approx(lru["hit_ratio"])
    # CSV traces carry no real-cache records: no observed hit efficiency (the page's data has them)
    assert cmp["overall"]["observed_accesses"] == 0 and cmp["overall"]["observed_hit_efficiency"] is None
    aged = [w["shadow_mean_age_s"]["lru"] for w in cmp["windows"] if w["shadow_mean_age_s"].get("lru")]
    span_s = (dt.datetime.fromisoformat(cmp["windows"][-1]["time"]) -
              dt.datetime.fromisoformat(cmp["windows"][0]["time"])).total_seconds() + 86400
    assert aged and all(0 < a < span_s for a in aged)  # the stored LRU's mean file age per window
    rec = client.get("/v1/recommend", params={"cache_group": "SITE-A", "from": FROM, "to": TO, "min_size": "50GB",
                                              "max_size": "20TB", "points": 6, "policy": "lru,arc",
                                              "fraction_of_optimum": 0.5}).json()
    assert "method" in rec and [r["policy"] for r in rec["recommendations"]] == ["lru", "arc"]
    for r in rec["recommendations"]:
        if r["reached"]:
            assert r["value_at_size"] >= 0.5 * rec["optimum"]["byte_hit_ratio"]
    assert client.get("/v1/alerts").json() == {"alerts": []}
    metrics = client.get("/metrics").text
    assert 'route="/v1/whatif"' in metrics and "cachescope_whatif_rows_scanned_total" in metrics


@pytest.mark.parametrize("cache_seconds", [0, 15])
def test_identical_requests_in_flight_compute_once(data, monkeypatch, cache_seconds):
    # 16 identical concurrent cold /v1/efficiency requests each computed the answer with the answer
    # cache off; in flight they share one computation whatever the cache keeps afterwards
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app
    from cachescope import reads

    reads_of_span, release = [], threading.Event()
    real = reads.time_span

    def time_span(store):  # the store's real answer, once every request is in
        reads_of_span.append(1)
        release.wait()
        return real(store)

    monkeypatch.setattr(reads, "time_span", time_span)
    # 16 slots: all 16 in flight at once (beyond the slots they would wait at the door, not join)
    app = create_app(Settings(store_dir=data["store"], answer_cache_seconds=cache_seconds, series_copy_max_rows=0,
                              concurrency=16))
    with TestClient(app) as c:
        answers = app.state.answers
        got: list = []
        threads = [threading.Thread(target=lambda: got.append(c.get("/v1/efficiency", params={"step": "1h"})))
                   for _ in range(16)]
        for t in threads:
            t.start()
        while len(reads_of_span) + getattr(answers, "joined", 0) < 16:  # all 16 computing or waiting
            time.sleep(0.01)
        release.set()
        for t in threads:
            t.join()
        assert [r.status_code for r in got] == [200] * 16 and len({r.content for r in got}) == 1
        assert len(reads_of_span) == 1 and answers.computed == 1 and answers.joined == 15
        assert 'cachescope_api_answers_total{outcome="joined"} 15.0' in c.get("/metrics").text


# ------------------------------------------------------------------------------------------ errors and limits

@pytest.mark.parametrize("body, field", [
    ({"size": "10XB"}, "size"),
    ({"policy": "nope"}, "policy"),
    ({"to": "2023-11-13T00:00:00Z"}, "to"),
    ({"from": "yesterday"}, "from"),
    ({"warmup": "P-1D"}, "warmup"),
    ({"sample_rate": 0}, "sample_rate"),
    ({"admission": {"max_file_size": "big"}}, "admission.max_file_size"),
    ({"policy": "arc", "params": {"arc": {"nope": 1}}}, "params"),
    ({"step": "0s"}, "step"),
])
def test_bad_fields_are_named_in_a_422(client, body, field):
    r = client.post("/v1/whatif", json={"policy": "lru", "size": "1TB", "from": FROM, "to": TO, **body})
    assert r.status_code == 422, r.text
    assert r.json()["field"].startswith(field), r.json()


@pytest.mark.parametrize("size", [2**63, 2**64 - 1, str(2**63), "18446744073709551615", "1.5", "0.1KiB", True, 1.5,
                                  ["1TB", True], ["1TB", "9223372036854775808"]])
def test_whatif_sizes_beyond_the_engine_or_not_whole_bytes_are_a_422_naming_size(client, size):
    # 2^63…2^64-1 was a 500 (the engine's bound, raised as a ValueError); "1.5" and true were 1 byte
    r = client.post("/v1/whatif", json={"policy": "lru", "size": size, "from": FROM, "to": TO})
    assert r.status_code == 422 and r.json()["field"] == "size", r.text
    r = client.get("/v1/recommend", params={"max_size": str(2**64 - 1), "from": FROM, "to": TO})
    assert r.status_code == 422 and r.json()["field"] == "max_size", r.text


def test_the_accepted_size_forms_still_answer(client):
    sizes = [whatif(client, policy="lru", size=s)["size_bytes"] for s in ("1TB", "1TiB", "1000000000000", 10**12,
                                                                           "1.5TB", 2**63 - 1)]
    assert sizes == [10**12, 2**40, 10**12, 10**12, 15 * 10**11, 2**63 - 1]


def test_an_unknown_site_is_the_same_422_for_whatif_and_efficiency(client):
    # the what-if answered 200 with zeros, the efficiency series 422: one rule, in the read layer
    w = client.post("/v1/whatif", json={"policy": "lru", "size": "1TB", "from": FROM, "to": TO, "site": "NOWHERE"})
    e = client.get("/v1/efficiency", params={"site": "NOWHERE"})
    for r in (w, e):
        assert r.status_code == 422 and r.json()["field"] == "site", r.text
        assert "'SITE-A'" in r.json()["detail"][0]["msg"] and "'SITE-B'" in r.json()["detail"][0]["msg"]
    assert whatif(client, policy="lru", size="1TB", site="SITE-B")["requests"] == \
        whatif(client, policy="lru", size="1TB", cache_group="SITE-B")["requests"] > 0


def test_bounds_answer_413_and_429(client):
    r = client.post("/v1/whatif", json={"policy": "lru", "size": "1TB", "from": "2020-01-01T00:00:00Z", "to": TO})
    assert r.status_code == 413 and r.json()["field"] == "to"
    r = client.post("/v1/whatif", content=b"{" + b" " * 70_000 + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 413
    limits = client.app.state.limits
    held = [limits._slots.acquire(blocking=False) for _ in range(client.app.state.settings.whatif_concurrency)]
    try:
        assert all(held)
        r = client.post("/v1/whatif", json={"policy": "lru", "size": "1TB", "from": FROM, "to": TO})
        assert r.status_code == 429 and r.headers["retry-after"]
    finally:
        for _ in held:
            limits._slots.release()
    assert client.get("/v1/efficiency", params={"step": "1s", "from": "2000-01-01T00:00:00Z"}).status_code == 413


def test_a_half_year_whatif_is_answered_and_the_bound_names_its_setting(client):
    # 184 days and a week of warm-up (191) are within the default bound; the data lie inside
    half = whatif(client, policy="lru", size="1TB", cache_group="SITE-A", **{"from": "2023-06-01T00:00:00Z",
                                                                            "to": "2023-12-02T00:00:00Z"}, warmup="P7D")
    assert half["requests"] == whatif(client, policy="lru", size="1TB", cache_group="SITE-A")["requests"] == 6000
    r = client.post("/v1/whatif", json={"policy": "lru", "size": "1TB", "from": "2023-03-01T00:00:00Z", "to": TO})
    assert r.status_code == 413 and r.json()["field"] == "to"
    assert "at most 200 days" in r.text and "CACHESCOPE_WHATIF_MAX_DAYS" in r.text


def test_tokens_are_required_with_their_scopes(data, monkeypatch):
    from fastapi.testclient import TestClient

    from api.core.config import Settings, SettingsError
    from api.main import create_app

    reader, full = "reader-token", "full-token"
    tokens = f"{hashlib.sha256(reader.encode()).hexdigest()}:read,{hashlib.sha256(full.encode()).hexdigest()}:read+whatif"
    with TestClient(create_app(Settings(store_dir=data["store"], api_tokens=tokens, host="0.0.0.0"))) as c:
        body = {"policy": "lru", "size": "1TB", "from": FROM, "to": TO}
        assert c.get("/v1/configs").status_code == 401
        assert c.get("/v1/configs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/v1/configs", headers={"Authorization": f"Bearer {reader}"}).status_code == 200
        r = c.post("/v1/whatif", json=body, headers={"Authorization": f"Bearer {reader}"})
        assert r.status_code == 403 and r.json()["field"] == "authorization"
        assert c.post("/v1/whatif", json=body, headers={"Authorization": f"Bearer {full}"}).status_code == 200
        # compare replays the xcache model only for a token that may run what-ifs
        q = {"cache_group": "SITE-A", "size": "1TB", "from": FROM, "to": TO}
        ro = c.get("/v1/compare", params=q, headers={"Authorization": f"Bearer {reader}"}).json()
        rw = c.get("/v1/compare", params=q, headers={"Authorization": f"Bearer {full}"}).json()
        assert "xcache" not in ro["source"] and "whatif scope" in ro["note"] and rw["source"]["xcache"] == "whatif"
        # /metrics: the metrics scope (a scraper's token) or the read scope; none without a token
        scraper = "scraper-token"
    scraped = f"{tokens},{hashlib.sha256(scraper.encode()).hexdigest()}:metrics"
    with TestClient(create_app(Settings(store_dir=data["store"], api_tokens=scraped, host="0.0.0.0"))) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"Authorization": f"Bearer {scraper}"}).status_code == 200
        assert c.get("/metrics", headers={"Authorization": f"Bearer {reader}"}).status_code == 200
        assert c.get("/v1/configs", headers={"Authorization": f"Bearer {scraper}"}).status_code == 403
    with pytest.raises(SettingsError, match="not loopback"):
        create_app(Settings(store_dir=data["store"], host="0.0.0.0"))
    with pytest.raises(SettingsError, match="needs API tokens"):
        create_app(Settings(clickhouse_url="clickhouse://127.0.0.1:9000"))


def test_metrics_labels_are_bounded_whatever_the_method_and_path(client):
    # any method string became a label value: 2,000 of them grew /metrics from 18.8 kB to 3.9 MB
    import random

    rng = random.Random(28)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    paths = lambda m: ["/v1/configs", "/v1/whatif", "/", f"/x{rng.randrange(10**9)}", f"/v1/{m[:40]}"]  # noqa: E731

    def labels(text: str) -> set[str]:
        return {line.split("{", 1)[1].split("}", 1)[0] for line in text.splitlines()
                if line.startswith("cachescope_api_request_seconds_count{")}

    for path in paths("BREW"):  # every (other, route, status) once, before the measure
        client.request("BREW", path)
    client.get("/metrics")
    first = client.get("/metrics").text
    before = len(first.encode())
    methods = []
    for i in range(2000):
        m = "".join(rng.choice(letters) for _ in range(rng.randint(3, 8000 if i % 100 == 0 else 24)))
        methods.append(m)
        assert client.request(m, rng.choice(paths(m))).status_code in (404, 405)
    text = client.get("/metrics").text
    after = len(text.encode())
    print(f"/metrics: {before} bytes before, {after} after 2,000 requests with random methods and paths")
    assert labels(text) == labels(first), labels(text) - labels(first)
    assert after - before < 1000, (before, after)  # the counts' digits, no new series


# ------------------------------------------------------------------------------------------ schemathesis

def test_openapi_has_examples_and_schemathesis_finds_no_server_error(client):
    import schemathesis
    from hypothesis import HealthCheck, given, settings

    spec = client.get("/openapi.json").json()
    for path in ("/v1/efficiency", "/v1/mrc", "/v1/compare", "/v1/whatif", "/v1/recommend", "/v1/configs", "/v1/alerts"):
        assert path in spec["paths"]
    assert "examples" in spec["components"]["schemas"]["WhatIfRequest"]

    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,
                                                    status_code_conformance)

    # positive_data_acceptance is left out on purpose: a schema-valid value can still be refused
    # for what it means (a site the store does not know, `to` before `from`) with a 422
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    schema = schemathesis.openapi.from_asgi("/openapi.json", client.app)
    failures: list[str] = []

    for op in schema.get_all_operations():
        operation = op.ok()
        # /v1/recommend runs a grid of replays per example: fewer of them
        n = 8 if operation.path == "/v1/recommend" else 25

        @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(case=operation.as_strategy())
        def check(case):
            try:
                case.call_and_validate(checks=checks)
            except Exception as e:  # noqa: BLE001 - collect every operation's failures
                failures.append(f"{operation.method} {operation.path}: {str(e)[:400]}")
                raise

        try:
            check()
        except Exception:  # noqa: BLE001
            pass
    assert not failures, "\n".join(failures[:5])


# ------------------------------------------------------------------------------------------ serve

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_whatif_equal_to_simulate(tmp_path):
    write_trace(tmp_path / "t.csv", 4000, seed=3)
    store = tmp_path / "store"
    assert run("replay", "--format", "csv", "--site", "S", "--store", str(store), str(tmp_path / "t.csv")).returncode == 0
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "CACHESCOPE_API_TOKENS"}
    proc = subprocess.Popen([CLI, "serve", "--store", str(store), "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while True:  # until it answers (however long the start takes) or exits
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.1)
        r = httpx.post(f"http://127.0.0.1:{port}/v1/whatif", timeout=120,
                       json={"policy": ["lru", "arc"], "size": SIZES, "from": FROM, "to": TO})
        assert r.status_code == 200, r.text
        want = simulate(tmp_path / "t.csv", policies=["lru", "arc"])
        for a in r.json()["results"]:
            same(a, want[(a["policy"], a["size_bytes"])])
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert "OPEN" in err and "Traceback" not in err


def start_serve(store: Path, **settings) -> tuple[subprocess.Popen, int]:
    """`cachescope serve` over `store` with CACHESCOPE_<NAME> settings, once it answers."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "CACHESCOPE_API_TOKENS"}
    env.update({f"CACHESCOPE_{k.upper()}": str(v) for k, v in settings.items()})
    proc = subprocess.Popen([CLI, "serve", "--store", str(store), "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while True:  # until it answers (however long the start takes) or exits
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return proc, port
        except httpx.TransportError:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.1)


@pytest.fixture(scope="module")
def serve_store(tmp_path_factory) -> Path:
    """A store of its own for `serve` processes (the module's store is held open by `client`)."""
    d = tmp_path_factory.mktemp("serve")
    write_trace(d / "t.csv", 500, seed=4)
    assert run("replay", "--format", "csv", "--site", "S", "--store", str(d / "store"), str(d / "t.csv")).returncode == 0
    return d / "store"


def read_until_closed(sock: socket.socket) -> bytes:
    # no timeout of the test's own: the server's configured one is what ends the wait
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def test_serve_closes_a_connection_stalled_in_its_header_or_body(serve_store):
    # a connection stalled in the middle of its headers stayed open for minutes (issue 28)
    proc, port = start_serve(serve_store, header_timeout_seconds=1, body_timeout_seconds=1)
    try:
        for stalled in (b"", b"GET /v1/configs HTTP/1.1\r\nHost: x\r\nX-Slow: ",
                        b"POST /v1/whatif HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\n\r\n{\"policy\": "):
            with socket.create_connection(("127.0.0.1", port)) as s:
                t0 = time.monotonic()
                s.sendall(stalled)
                answer = read_until_closed(s)
                print(f"{stalled[:20]!r}…: closed after {time.monotonic() - t0:.2f} s: {answer[:40]!r}")
                assert answer.startswith(b"HTTP/1.1 408") if not stalled.startswith(b"POST") else answer == b""
        # a kept-alive connection: the next request's header has its own deadline
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHo")
            answer = read_until_closed(s)
            assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"HTTP/1.1 ") == 2 and b" 408 " in answer
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    finally:
        proc.terminate()
        _, err = proc.communicate()
    assert "Traceback" not in err, err


def test_serve_caps_open_connections(serve_store):
    proc, port = start_serve(serve_store, max_connections=3, header_timeout_seconds=3600)
    try:
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        with socket.create_connection(("127.0.0.1", port)) as extra:
            assert read_until_closed(extra).startswith(b"HTTP/1.1 503")
        for s in held:
            s.close()
        while True:  # the server sees the three closes, then serves again (an event, however late)
            assert proc.poll() is None, "serve exited instead of serving again after the connections closed"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    finally:
        proc.terminate()
        _, err = proc.communicate()
    assert "Traceback" not in err, err


def test_serve_refuses_to_start_open_off_loopback_and_names_a_missing_store(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CACHESCOPE_API_TOKENS"}
    (tmp_path / "s").mkdir()
    out = run("serve", "--store", str(tmp_path / "s"), "--host", "0.0.0.0", env=env)
    assert out.returncode == 2 and "not loopback" in out.stderr and "Traceback" not in out.stderr
    out = run("serve", "--store", str(tmp_path / "missing"), env=env)
    assert out.returncode == 2 and "no store" in out.stderr
    out = run("serve", "--clickhouse", "clickhouse://127.0.0.1:1", env=env)
    assert out.returncode == 2 and "tokens" in out.stderr
    # a port in use: one line, exit 1
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        out = run("serve", "--store", str(tmp_path / "s"), "--port", str(busy.getsockname()[1]), env=env)
    assert out.returncode == 1 and "cannot listen" in out.stderr and "Traceback" not in out.stderr


# ------------------------------------------------------------------------------------------ ClickHouse server


# ------------------------------------------------------------------------------------------ live admission

def test_live_pipeline_admission_matches_the_whatif_filter(client, data, tmp_path):
    """`pipeline.shadow.admission` in the processor counts exactly what the what-if filter counts."""
    from cachescope.config.pipeline import PipelineConfig
    from cachescope.core.processor import GroupProcessor
    from cachescope.simulation import FIELDS

    store = client.app.state.stores._all[0]
    from cachescope import reads

    df = reads.whatif_accesses(store, dt.datetime(2023, 11, 14, tzinfo=UTC), dt.datetime(2023, 11, 18, tzinfo=UTC),
                               cache_groups=["SITE-A"])
    n = len(df)
    from cachescope.core.columns import EventColumns

    ev = EventColumns(
        ts=df["ts_us"].to_numpy(np.int64), seq=df["seq"].to_numpy(np.uint64), file_id=df["file_id"].to_numpy(np.uint64),
        file_size=df["file_size"].to_numpy(np.uint64), bytes_read=df["bytes_read"].to_numpy(np.uint64),
        op=df["op_code"].to_numpy(np.uint8), tier=df["tier"].to_numpy(object), server=df["server"].to_numpy(object),
        source=np.full(n, "csv", dtype=object), site=df["site"].to_numpy(object), client=np.full(n, "", dtype=object),
        vo=np.full(n, "", dtype=object), path=np.full(n, "", dtype=object), cache_group=df["cache_group"].to_numpy(object),
        observed_hit_bytes=np.full(n, -1, np.int64), observed_miss_bytes=np.full(n, -1, np.int64),
        observed_bypass_bytes=np.full(n, -1, np.int64), observed_hit=np.full(n, -1, np.int8),
        observed_origin_bytes=np.full(n, -1, np.int64), origin=df["origin"].to_numpy(object))
    cfg = PipelineConfig.model_validate({"shadow": {"policies": ["lru", "arc"], "sizes": ["200GB", "1TB"],
                                                    "admission": {"exclude_tiers": ["USER"], "max_file_size": "30GB"}},
                                         "curve": {"enabled": False}})
    p = GroupProcessor("SITE-A", cfg)
    rows = []
    for a in range(0, n, 1000):  # batches, as a stream
        e = p.process(ev.take(np.arange(a, min(a + 1000, n))))
        rows.append(e.efficiency)
    rows.append(p.flush().efficiency)
    got = {}
    for r in rows:
        if r is None:
            continue
        r = r.columns()
        for pol, size, *vals in zip(r["policy"], r["size_bytes"], *(r[f] for f in FIELDS[:4])):
            acc = got.setdefault((pol, int(size)), [0, 0, 0, 0])
            for i, v in enumerate(vals):
                acc[i] += int(v)
    want = whatif(client, policy=["lru", "arc"], size=SIZES, cache_group="SITE-A",
                  admission={"exclude_tiers": ["USER"], "max_file_size": "30GB"})
    for r in want["results"]:
        assert got[(r["policy"], r["size_bytes"])] == [r[f] for f in FIELDS[:4]]


# ------------------------------------------------------------------------------------------ partitions by server

SPLIT_SERVERS = ["xcache-a", "xcache-b", "xcache-c"]


def fill_three_servers(store, tmp_path: Path, group: str) -> dict:
    """Accesses of three servers of one cache group (shared files), stored as the pipeline stores
    them, and the same accesses as `simulate` traces: one per server and all merged in time order."""
    from cachescope.store import tables

    per, merged = {}, []
    for k, name in enumerate(SPLIT_SERVERS):
        rows = write_trace(tmp_path / f"{name}.csv", 1500, seed=7 + k)
        rows = [(r[0] + 7 * k,) + tuple(r[1:]) for r in rows]  # distinct times across servers
        write_rows(tmp_path / f"{name}.csv", rows)
        per[name] = tmp_path / f"{name}.csv"
        merged += [(r, name, i) for i, r in enumerate(rows)]
    merged.sort(key=lambda x: x[0][0])
    write_rows(tmp_path / "merged.csv", [r for r, _, _ in merged])
    n = len(merged)
    store.insert(tables.ACCESS_EVENTS, {
        "ts": np.array([r[0] * 10**6 for r, _, _ in merged], dtype="datetime64[us]"),
        "site": ["SITE-S"] * n, "source": ["xrootd"] * n, "server": [s for _, s, _ in merged], "client": [""] * n,
        "vo": ["cms"] * n, "path": [r[4] for r, _, _ in merged], "file_id": np.array([r[1] for r, _, _ in merged], np.uint64),
        "file_size": np.array([r[2] for r, _, _ in merged], np.uint64), "bytes_read": np.array([r[5] for r, _, _ in merged], np.uint64),
        "op": np.zeros(n, np.uint8), "tier": [r[3] for r, _, _ in merged], "cache_group": [group] * n,
        "origin": [f"test:{s}" for _, s, _ in merged], "seq": np.array([i for _, _, i in merged], np.uint64)})
    return {"per": per, "merged": tmp_path / "merged.csv"}


def add_up(answers: list[dict]) -> dict:
    out = {f: sum(a[f] for a in answers) for f in FIELDS}
    tiers = {t for a in answers for t in a["by_tier"]}
    out["by_tier"] = {t: {f: sum(a["by_tier"][t][f] for a in answers if t in a["by_tier"]) for f in FIELDS} for t in tiers}
    return out


def assert_routed_by_server(post, traces: dict, group: str) -> None:
    """partitions = the number of servers: one cache per server of 1/N of the size each, equal to
    `simulate` of each server's accesses at that size, beside `simulate` of all of them at the whole size."""
    size = 10**12
    caps = [size // 3 + int(k < size % 3) for k in range(3)]
    want = {name: simulate(traces["per"][name], policies=["lru", "belady"], sizes=[str(caps[k])])
            for k, name in enumerate(SPLIT_SERVERS)}
    shared = simulate(traces["merged"], policies=["lru", "belady"], sizes=[str(size)])
    for form in (3, "server"):
        got = post({"policy": ["lru", "belady"], "size": "1TB", "cache_group": group, "partitions": form})
        for a in got["results"]:
            p = a["policy"]
            per = [want[name][(p, caps[k])] for k, name in enumerate(SPLIT_SERVERS)]
            assert a["routing"]["by"] == "server" and a["partitions"] == 3, a["routing"]
            same(a, add_up(per))
            assert {name: tuple(a["by_server"][name][f] for f in FIELDS) for name in SPLIT_SERVERS} == \
                {name: tuple(per[k][f] for f in FIELDS) for k, name in enumerate(SPLIT_SERVERS)}
            assert tuple(a["shared"][f] for f in FIELDS) == tuple(shared[(p, size)][f] for f in FIELDS)
    # two partitions of three servers: not expressible per server, so by file hash, as simulate does
    got = post({"policy": "lru", "size": "1TB", "cache_group": group, "partitions": 2})
    assert got["routing"]["by"] == "file" and "3 server" in got["routing"]["reason"] and "by_server" not in got
    same(got, simulate(traces["merged"], "--partitions", "2", policies=["lru"], sizes=["1TB"])[("lru", size)])


def test_partitions_route_by_the_server_of_the_stored_accesses(client, tmp_path):
    with client.app.state.stores.get() as store:
        traces = fill_three_servers(store, tmp_path, "SPLIT-CHDB")

    def post(body):
        r = client.post("/v1/whatif", json={"from": FROM, "to": TO, **body})
        assert r.status_code == 200, r.text
        return r.json()

    assert_routed_by_server(post, traces, "SPLIT-CHDB")
    r = client.post("/v1/whatif", json={"from": FROM, "to": TO, "policy": "lru", "size": "1TB", "cache_group": "SITE-A",
                                        "partitions": "server"})
    assert r.status_code == 422 and r.json()["field"] == "partitions", r.text
