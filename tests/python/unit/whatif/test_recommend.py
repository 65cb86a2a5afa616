"""Recommendations (cachescope/recommend.py): the smallest size reaching a target within 1 % of the
exact answer, checked against fine grids of what-if passes over a store written by `cachescope replay`;
the route's and the command's forms and errors."""

from __future__ import annotations

import datetime as dt

import numpy as np
import orjson
import pytest
from test_api import FROM, TO, run, write_trace

UTC = dt.timezone.utc
START, END = dt.datetime(2023, 11, 14, tzinfo=UTC), dt.datetime(2023, 11, 18, tzinfo=UTC)
LO, HI = 50 * 10**9, 20 * 10**12


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("recommend")
    write_trace(d / "a.csv", 6000, seed=1)
    for store in ("store", "cli-store"):  # chDB opens a store in one process at a time: the command's own
        out = run("replay", "--format", "csv", "--site", "SITE-A", "--store", str(d / store), str(d / "a.csv"))
        assert out.returncode == 0, out.stderr
    return d


@pytest.fixture(scope="module")
def store(data):
    from cachescope.store import open_store

    with open_store(store_dir=data / "store") as st:
        yield st


def ask(store, policies, **kw) -> dict:
    from cachescope.recommend import Recommend, recommend

    kw.setdefault("fraction_of_optimum", 0.7)
    return recommend(store, Recommend(policies, START, END, cache_groups=["SITE-A"], min_size=LO, max_size=HI,
                                      points=6, **kw))


def replayed(store, policy: str, sizes) -> dict[int, dict]:
    from cachescope.replay import WhatIf, run_whatif

    res = run_whatif(store, WhatIf([policy], sorted({int(s) for s in sizes}), START, END, cache_groups=["SITE-A"]))
    return {a["size_bytes"]: a for a in res.answers()}


@pytest.mark.parametrize("policy", ["arc", "belady"])
def test_the_search_answers_within_one_percent_of_a_fine_grid_of_whatif_passes(store, policy):
    answer = ask(store, [policy])
    r, goal = answer["recommendations"][0], answer["goal"]
    b = r["bracket"]
    assert r["reached"] and b["upper_size_bytes"] == r["smallest_size_bytes"] and b["passes"] > 1
    assert b["lower_value"] < goal <= b["upper_value"] and b["upper_size_bytes"] <= 1.01 * b["lower_size_bytes"]
    # the exact smallest size, from what-if passes 0.2 % apart around the answer and 2 % apart over the range
    grid = replayed(store, policy, [*np.geomspace(b["lower_size_bytes"] / 1.1, b["upper_size_bytes"] * 1.1, 100),
                                    *np.geomspace(LO, HI, 300)])
    want = min(s for s, a in grid.items() if a["byte_hit_ratio"] >= goal)
    assert want / 1.002 <= r["smallest_size_bytes"] <= 1.01 * want, (want, r)
    assert grid[max(s for s in grid if s < want)]["byte_hit_ratio"] < goal  # the grid's answer is the smallest


def test_lru_answers_from_its_exact_curve_equal_to_whatif_passes(store):
    answer = ask(store, ["lru"], target=0.55, fraction_of_optimum=None, metric="hit")
    r = answer["recommendations"][0]
    b = r["bracket"]
    assert b["passes"] == 1 and "exact" in r["method"] and b["upper_size_bytes"] <= 1.01 * b["lower_size_bytes"]
    at = replayed(store, "lru", [b["lower_size_bytes"], b["upper_size_bytes"], *(p["size_bytes"] for p in r["curve"])])
    assert at[b["lower_size_bytes"]]["hit_ratio"] == pytest.approx(b["lower_value"], abs=1e-12) and b["lower_value"] < 0.55
    assert at[b["upper_size_bytes"]]["hit_ratio"] == pytest.approx(b["upper_value"], abs=1e-12) and b["upper_value"] >= 0.55
    for p in r["curve"]:  # the curve in the answer: the engine's exact LRU, what the what-if replays count
        assert (p["bytes_hit"], p["hit_ratio"]) == (at[p["size_bytes"]]["bytes_hit"],
                                                    pytest.approx(at[p["size_bytes"]]["hit_ratio"], abs=1e-12))


def test_the_route_states_method_and_bracket_and_refuses_an_unreachable_target(data):
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app

    params = {"cache_group": "SITE-A", "from": FROM, "to": TO, "min_size": "50GB", "max_size": "20TB",
              "points": 6, "policy": "lru,arc", "fraction_of_optimum": 0.7}
    with TestClient(create_app(Settings(store_dir=data / "store"))) as c:
        got = c.get("/v1/recommend", params=params)
        high = c.get("/v1/recommend", params={**{k: v for k, v in params.items() if k != "fraction_of_optimum"},
                                              "target": 0.99})
    assert got.status_code == 200, got.text
    body = got.json()
    assert "within 1 %" in body["method"] and body["goal"] == pytest.approx(0.7 * body["optimum"]["byte_hit_ratio"])
    for r in body["recommendations"]:
        b = r["bracket"]
        assert r["reached"] and r["smallest_size_bytes"] == b["upper_size_bytes"] and r["value_at_size"] == b["upper_value"]
        assert b["lower_value"] < body["goal"] <= b["upper_value"] and b["upper_size_bytes"] <= 1.01 * b["lower_size_bytes"]
        assert r["method"] and len(r["curve"]) == 6
    assert high.status_code == 422 and high.json()["field"] == "target", high.text
    assert "0.99" in high.json()["detail"][0]["msg"] and "max_size" in high.json()["detail"][0]["msg"]


def test_the_command_answers_as_the_route_and_one_line_when_unreachable(data):
    args = ["whatif", "--store", str(data / "cli-store"), "--policy", "lru,arc", "--from", FROM, "--to", TO,
            "--cache-group", "SITE-A", "--size", "50GB,20TB", "--recommend", "0.6"]
    out = run(*args, "--json")
    assert out.returncode == 0, out.stderr
    body = orjson.loads(out.stdout)
    assert [r["policy"] for r in body["recommendations"]] == ["lru", "arc"] and body["goal"] == 0.6
    assert all(r["bracket"]["upper_size_bytes"] <= 1.01 * r["bracket"]["lower_size_bytes"] for r in body["recommendations"])
    table = run(*args)
    assert table.returncode == 0 and "lru" in table.stdout and "within 1 %" in table.stdout
    bad = run(*args[:-1], "0.99")
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1 and "--recommend" in bad.stderr, bad.stderr
    usage = run(*args[:-4], "--size", "1TB", "--recommend", "0.6")
    assert usage.returncode == 2 and "MIN,MAX" in usage.stderr
    warm = run(*args, "--warmup", "1d")  # the search's replays start cold: refused, not ignored
    assert warm.returncode == 2 and "--warmup" in warm.stderr


def test_the_route_holds_a_replay_slot_for_the_lru_curve_pass(data, monkeypatch):
    # the LRU curve reads the whole range like a what-if: it counts against the concurrent replays
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app
    from cachescope import recommend

    app = create_app(Settings(store_dir=data / "store", whatif_concurrency=1))
    free_during: list[bool] = []
    real = recommend.lru_exact

    def lru_exact(*args):
        free_during.append(app.state.limits._slots.acquire(blocking=False))
        return real(*args)

    monkeypatch.setattr(recommend, "lru_exact", lru_exact)
    with TestClient(app) as c:
        r = c.get("/v1/recommend", params={"cache_group": "SITE-A", "from": FROM, "to": TO, "min_size": "50GB",
                                           "max_size": "20TB", "points": 4, "policy": "lru", "target": 0.3})
    assert r.status_code == 200, r.text
    assert free_during == [False]
