"""Bounded reads and honest answers: a read too large for the server is refused at once naming the
step that fits, /v1 requests share the server's slots with what-if while /healthz stays outside
them, a filter value the store holds nothing of is a 422 naming the known ones, and /v1/configs
counts each access once however often a replay wrote it.

The store: a small trace replayed by `cachescope replay` (accesses and results of group SITE-A),
plus efficiency rows of group LONG across 2024-01-01 … 2024-07-09 written into the minute, hour
and day tables as the core writes them (2 policies x 1 size x 3 tiers, one-minute windows).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from support.api import api_client

CLI = str(Path(sys.executable).parent / "cachescope")
T0 = 1_700_000_000  # 2023-11-14T22:13:20Z
FROM, TO = "2023-11-14T00:00:00Z", "2023-11-18T00:00:00Z"
LONG_FROM, LONG_TO = "2024-01-01T00:00:00Z", "2024-07-09T00:00:00Z"
POLICIES, SIZES, TIERS = ["lru", "arc"], [10**13], ["AOD", "HITS", "USER"]


def write_long_results(store) -> int:
    from cachescope.store import tables

    start = int(np.datetime64("2024-01-01T00:00:00", "s").astype(np.int64))
    end = int(np.datetime64("2024-07-09T00:00:00", "s").astype(np.int64))
    rng = np.random.default_rng(7)
    n = 0
    for table, length in ((tables.EFFICIENCY, 60), (tables.EFFICIENCY_HOURLY, 3600), (tables.EFFICIENCY_DAILY, 86_400)):
        windows = np.arange(start, end, length)
        pol, size, tier, win = (a.reshape(-1) for a in np.meshgrid(
            np.arange(len(POLICIES)), np.arange(len(SIZES)), np.arange(len(TIERS)), windows, indexing="ij"))
        m = win.size
        req = rng.integers(1, 50, m).astype(np.uint64) * np.uint64(length // 60)
        hits = req // np.uint64(2)
        n += store.insert(table, {
            "window_start": win.astype("datetime64[s]"), "window_end": (win + length).astype("datetime64[s]"),
            "cache_group": np.full(m, "LONG", dtype=object), "policy": np.array(POLICIES, dtype=object)[pol],
            "size_bytes": np.array(SIZES, dtype=np.uint64)[size], "tier": np.array(TIERS, dtype=object)[tier],
            "sample_rate": np.ones(m), "partitions": np.ones(m, np.uint32), "requests": req, "hits": hits,
            "bytes_requested": req * np.uint64(10**9), "bytes_hit": hits * np.uint64(10**9),
            "bytes_filled": np.zeros(m, np.uint64), "evictions": np.zeros(m, np.uint64),
            "bytes_evicted": np.zeros(m, np.uint64)})
    return n


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bounds")
    rng = np.random.default_rng(3)
    files = rng.integers(0, 300, 4000)
    rows = "".join(f"{T0 + 30 * i},{f + 1},{10**9 * (1 + f % 7)},{TIERS[f % 3]},/store/f{f},{10**9 * (1 + f % 7)}\n"
                   for i, f in enumerate(files.tolist()))
    (d / "t.csv").write_text("timestamp,obj_id,obj_size,tier,path,bytes_read\n" + rows)
    out = subprocess.run([CLI, "replay", "--format", "csv", "--site", "SITE-A", "--store", str(d / "store"),
                          str(d / "t.csv")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    from cachescope.store import open_store

    store = open_store(store_dir=d / "store")
    try:
        write_long_results(store)
    finally:
        store.close()
    return d / "store"


@pytest.fixture(scope="module")
def app_client(store_dir):
    with api_client(store_dir=store_dir) as c:
        yield c


# ------------------------------------------------------------------------------------- bounded reads

HALF_YEAR = {"from": LONG_FROM, "to": LONG_TO, "by_tier": "true"}


def test_the_half_year_request_at_2m_is_refused_at_once_naming_the_step_that_fits(app_client):
    # the issue's request: 190 days at 2 minutes by tier is 6 series x 136,800 buckets = 821 k points
    r = app_client.get("/v1/efficiency", params={**HALF_YEAR, "step": "2m"})
    assert r.status_code == 422 and r.json()["field"] == "step", r.text
    msg = r.json()["detail"][0]["msg"]
    assert "6 series x 136,800 buckets" in msg and "max_points" in msg
    # 150,000 points / 6 series = 25,000 buckets: 11 minutes (24,873 buckets) fits, 10 does not
    assert "the smallest step that fits is 11m" in msg, msg
    assert app_client.get("/v1/efficiency", params={**HALF_YEAR, "step": "10m"}).status_code == 422
    ok = app_client.get("/v1/efficiency", params={**HALF_YEAR, "step": "11m"})
    assert ok.status_code == 200, ok.text
    series = ok.json()["series"]
    assert len(series) == 6 and sum(len(s["time"]) for s in series) <= 150_000
    # tiers summed: 2 series fit in a step 3 times shorter
    r = app_client.get("/v1/efficiency", params={"from": LONG_FROM, "to": LONG_TO, "step": "2m"})
    assert r.status_code == 422 and "the smallest step that fits is 4m" in r.text, r.text


def test_a_step_that_reads_the_minute_table_over_months_is_bounded_by_the_windows_read(store_dir):
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app

    # 6 tier series x 273,600 minute windows = 1.6 M rows read: over a bound of 1 M the step must be
    # whole hours (the hour table: 6 x 4,560 windows), although 61 minutes would hold few points
    with TestClient(create_app(Settings(store_dir=store_dir, max_rows_read=1_000_000))) as c:
        r = c.get("/v1/efficiency", params={**HALF_YEAR, "step": "61m"})
        assert r.status_code == 422 and r.json()["field"] == "step"
        assert "1,641,600 stored windows" in r.text and "the smallest step that fits is 1h" in r.text, r.text
        assert c.get("/v1/efficiency", params={**HALF_YEAR, "step": "1h"}).status_code == 200
        # from the in-process copy of the hour table (no store query) the points bound holds alike
    with TestClient(create_app(Settings(store_dir=store_dir, max_points=10_000))) as c:
        r = c.get("/v1/efficiency", params={**HALF_YEAR, "step": "1h"})
        assert r.status_code == 422 and "6 series x 4,560 buckets" in r.text, r.text
        assert "the smallest step that fits is 3h" in r.text, r.text


def test_healthz_answers_while_the_heaviest_allowed_read_is_in_flight(app_client):
    """The largest answer the bound allows (11 minutes over the half year: 1.6 M minute windows
    read, 149 k points) holds the embedded store for its query: /healthz answers meanwhile, saying
    the store is busy, instead of queueing behind it."""
    app_client.app.state.answers.seconds = 0  # every request computes (no answer kept)
    done = threading.Event()
    status = {}

    def heavy():
        status["heavy"] = app_client.get("/v1/efficiency", params={**HALF_YEAR, "step": "11m"}).status_code
        done.set()

    t = threading.Thread(target=heavy)
    t.start()
    during = []
    try:
        while not done.is_set():
            r = app_client.get("/healthz")
            if not done.is_set():  # answered while the heavy read was still in flight
                during.append((r.status_code, r.json().get("busy")))
    finally:
        t.join()
        app_client.app.state.answers.seconds = 15.0
    assert status["heavy"] == 200
    assert during and all(code == 200 for code, _ in during)
    assert any(busy for _, busy in during), "no /healthz answered while the read held the store"


def test_v1_requests_beyond_the_slots_get_a_503_and_healthz_stays_up(store_dir):
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app

    with TestClient(create_app(Settings(store_dir=store_dir, concurrency=1, busy_wait_seconds=0))) as c:
        slots = c.app.state.slots
        assert c.portal.call(slots.acquire)  # one request in flight holds the only slot
        try:
            for r in (c.get("/v1/configs"), c.post("/v1/whatif", json={"policy": "lru", "size": "1TB",
                                                                       "from": FROM, "to": TO})):
                assert r.status_code == 503 and r.headers["retry-after"], r.text
                assert "busy" in r.json()["detail"][0]["msg"]
            assert c.get("/healthz").status_code == 200 and c.get("/").status_code == 200
        finally:
            async def release():
                slots.release()
            c.portal.call(release)
        assert c.get("/v1/configs").status_code == 200
        assert "cachescope_api_busy_refused_total 2.0" in c.get("/metrics").text

    # with a wait, a request finding the slot taken is served once it frees
    with TestClient(create_app(Settings(store_dir=store_dir, concurrency=1, busy_wait_seconds=600))) as c:
        slots = c.app.state.slots
        assert c.portal.call(slots.acquire)
        got = {}
        t = threading.Thread(target=lambda: got.update(r=c.get("/v1/configs")))
        t.start()

        async def waiting() -> bool:
            return slots._sem is not None and bool(slots._sem._waiters)

        while not c.portal.call(waiting):  # the request is queued on the slot
            pass

        async def release():
            slots.release()
        c.portal.call(release)
        t.join()
        assert got["r"].status_code == 200


# ------------------------------------------------------------------------------------- no silent zero

def assert_unknown(r, field: str, known: str) -> None:
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.text
    assert "known:" in r.text and known in r.text, r.text


def test_an_unknown_filter_value_is_a_422_naming_the_known_ones_on_every_endpoint(app_client):
    c = app_client
    q = {"from": FROM, "to": TO}
    assert_unknown(c.get("/v1/efficiency", params={**q, "cache_group": "SITE-Ax"}), "cache_group", "'SITE-A'")
    # the in-process copy's path (hour step, range given) asks the store about a name it lacks
    assert_unknown(c.get("/v1/efficiency", params={**q, "step": "1h", "cache_group": "SITE-A,SITE-Ax"}),
                   "cache_group", "'LONG'")
    assert_unknown(c.get("/v1/efficiency", params={**q, "step": "1m", "policy": "lruu"}), "policy", "'lru'")
    assert_unknown(c.get("/v1/efficiency", params={**q, "tier": "AODD"}), "tier", "'AOD'")
    assert_unknown(c.get("/v1/mrc", params={**q, "cache_group": "SITE-Ax"}), "cache_group", "'SITE-A'")
    assert_unknown(c.get("/v1/mrc", params={**q, "tier": "AODD"}), "tier", "'HITS'")
    assert_unknown(c.get("/v1/compare", params={**q, "cache_group": "SITE-Ax", "size": "1TB"}), "cache_group",
                   "'SITE-A'")
    assert_unknown(c.get("/v1/recommend", params={**q, "cache_group": "SITE-Ax"}), "cache_group", "'SITE-A'")
    assert_unknown(c.get("/v1/alerts", params={**q, "cache_group": "SITE-Ax"}), "cache_group", "'SITE-A'")
    w = c.post("/v1/whatif", json={"policy": "lru", "size": "1TB", **q, "cache_group": "SITE-Ax"})
    assert_unknown(w, "cache_group", "'SITE-A'")
    w = c.post("/v1/whatif", json={"policy": ["lru"], "size": ["1TB"], **q, "cache_group": ["SITE-A", "MWT2x"]})
    assert_unknown(w, "cache_group", "'SITE-A'")
    # a known name with nothing in the range is an honest empty answer, not a refusal
    r = c.get("/v1/efficiency", params={**q, "cache_group": "LONG"})
    assert r.status_code == 200 and r.json()["series"] == []
    r = c.get("/v1/efficiency", params={**q, "step": "1h", "cache_group": "SITE-A"})
    assert r.status_code == 200 and r.json()["series"]
    assert c.post("/v1/whatif", json={"policy": "lru", "size": "1TB", **q, "cache_group": "SITE-A"}).json()["requests"]


def test_configs_count_each_access_once_when_a_replay_wrote_it_twice(app_client):
    from cachescope.store import tables

    store = app_client.app.state.stores._all[0]
    app_client.app.state.answers.seconds = 0
    want = int(store.query(f"SELECT count() FROM {tables.ACCESS_EVENTS} FINAL WHERE cache_group = 'SITE-A'").scalar())
    # an interrupted and resumed replay: the same accesses (same identity) in a second part, not merged yet
    store.command(f"SYSTEM STOP MERGES {tables.ACCESS_EVENTS}")
    try:
        store.command(f"INSERT INTO {tables.ACCESS_EVENTS} SELECT * FROM {tables.ACCESS_EVENTS} "
                      "WHERE cache_group = 'SITE-A' AND seq % 2 = 0")
        raw = int(store.query(f"SELECT count() FROM {tables.ACCESS_EVENTS} WHERE cache_group = 'SITE-A'").scalar())
        assert raw > want  # the duplicates are there
        groups = {g["cache_group"]: g for g in app_client.get("/v1/configs").json()["cache_groups"]}
        assert groups["SITE-A"]["accesses"] == want == 4000
    finally:
        store.command(f"SYSTEM START MERGES {tables.ACCESS_EVENTS}")
        app_client.app.state.answers.seconds = 15.0
