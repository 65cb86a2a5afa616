"""Large answers are streamed (api/stream.py): the bytes are those of the whole answer, gzip
included, and `serve`'s memory stays bounded over many large answers (none kept whole, the
answer cache bounded in bytes) while /healthz answers in the middle of one.

The store: test_api_bounds' (group LONG: 2 policies x 1 size x 3 tiers over 190 days in the
minute, hour and day tables); 1h by tier over it is 6 series x 4,560 buckets = 27,360 points."""

from __future__ import annotations

import datetime as dt
import gzip
import os
import socket
import subprocess
import threading

import httpx
import orjson
import pytest
from test_api_bounds import CLI, HALF_YEAR, LONG_FROM, LONG_TO, store_dir  # noqa: F401 (a fixture)


def _whole(app, step_s: int, table: str) -> bytes:
    """The answer's JSON made whole, as before streaming."""
    from api import series_index
    from api.routes.efficiency import columnar_series
    from cachescope import reads

    start, end = (dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (LONG_FROM, LONG_TO))
    head = {"step": "1h", "table": table, "from": start.isoformat(), "to": end.isoformat()}
    with app.state.stores.get() as store:
        copy = app.state.series.copy_of(store, table)
        if copy is not None:
            return series_index.dumps({**head, "series": copy.series_json(start, end, step_s, by_tier=True)})
        df = reads.efficiency_series(store, start, end, step_s, by_tier=True)
        return orjson.dumps({**head, "series": columnar_series(df)}, option=orjson.OPT_SERIALIZE_NUMPY)


@pytest.mark.parametrize("copy_rows", [1_000_000, 0], ids=["table-copy", "sql"])
def test_a_large_answer_is_streamed_with_the_bytes_of_the_whole(store_dir, copy_rows):  # noqa: F811
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app
    from cachescope.store import tables

    app = create_app(Settings(store_dir=store_dir, series_copy_max_rows=copy_rows))
    with TestClient(app) as c:
        want = _whole(app, 3600, tables.EFFICIENCY_HOURLY)
        assert len(want) > 1_900_000
        for enc in ("identity", "gzip"):
            with c.stream("GET", "/v1/efficiency", params={**HALF_YEAR, "step": "1h"},
                          headers={"Accept-Encoding": enc}) as r:
                assert r.status_code == 200
                assert "content-length" not in r.headers  # sent as written
                raw = b"".join(r.iter_raw())
            # the request that computes it gets it as written (as a whole answer's first request: gzip
            # costs more CPU than sending); those that join it share one gzip (below)
            assert "content-encoding" not in r.headers
            assert raw == want, enc
        # a small answer goes whole (kept, its gzip shared)
        small = c.get("/v1/efficiency", params={"from": LONG_FROM, "to": LONG_TO, "step": "1d"})
        assert small.status_code == 200 and int(small.headers["content-length"]) == len(small.content)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _vm(pid: int, field: str) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


def test_serve_memory_stays_bounded_over_many_large_answers_and_healthz_answers_meanwhile(store_dir):  # noqa: F811
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CACHESCOPE_")}
    proc = subprocess.Popen([CLI, "serve", "--store", str(store_dir), "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=None) as c:
            while True:  # ready once /healthz answers (or the server exited: its error)
                try:
                    if c.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    assert proc.poll() is None, proc.stderr.read()

            def ask(k: int) -> int:
                start = dt.datetime.fromisoformat(LONG_FROM.replace("Z", "+00:00")) + dt.timedelta(hours=k)
                r = c.get("/v1/efficiency", params={**HALF_YEAR, "step": "1h", "from": start.isoformat()},
                          headers={"Accept-Encoding": "gzip"})
                assert r.status_code == 200, r.text
                return sum(len(s["time"]) for s in r.json()["series"])

            assert ask(0) > 27_000  # the copy loaded, one answer streamed: the baseline
            before = _vm(proc.pid, "VmHWM")
            # 48 distinct large answers (2 MB of JSON each), 4 at a time: 94 MB if kept whole
            done: list[int] = []
            threads = [threading.Thread(target=lambda i=i: done.extend(ask(k) for k in range(1 + i, 49, 4)))
                       for i in range(4)]
            for t in threads:
                t.start()
            # in the middle of a streamed answer (its first piece read, the rest not yet): /healthz answers
            with c.stream("GET", "/v1/efficiency", params={**HALF_YEAR, "step": "1h"},
                          headers={"Accept-Encoding": "identity"}) as r:
                pieces = r.iter_raw()
                first = next(pieces)
                assert first.startswith(b'{"step":"1h"')
                h = httpx.get(f"{base}/healthz", timeout=None)
                assert h.status_code == 200, h.text
                rest = b"".join(pieces)
            assert orjson.loads(first + rest)["series"]
            for t in threads:
                t.join()
            assert len(done) == 48 and min(done) > 27_000
            grown = _vm(proc.pid, "VmHWM") - before
            print(f"serve VmHWM {before / 2**20:.1f} MiB after the first answer, grew {grown / 2**20:.1f} MiB over 48 more")
            assert grown < 64 << 20, f"serve's peak memory grew {grown / 2**20:.1f} MiB over 48 large answers"
    finally:
        proc.terminate()
        proc.wait()


def test_a_long_compare_answer_is_streamed_with_the_bytes_of_the_whole(store_dir, monkeypatch):  # noqa: F811
    """/v1/compare over the half year at 1h (4,560 windows) goes in pieces; the same answer made
    whole (the streaming thresholds raised) has the same bytes."""
    from fastapi.testclient import TestClient

    from api import stream
    from api.core.config import Settings
    from api.main import create_app

    q = {"cache_group": "LONG", "size": "10TB", "from": LONG_FROM, "to": LONG_TO, "step": "1h", "xcache": "false"}
    with TestClient(create_app(Settings(store_dir=store_dir, answer_cache_seconds=0))) as c:
        with c.stream("GET", "/v1/compare", params=q, headers={"Accept-Encoding": "identity"}) as r:
            assert r.status_code == 200 and "content-length" not in r.headers
            streamed = b"".join(r.iter_raw())
        monkeypatch.setattr(stream, "STREAM_WINDOWS", 10**9)
        whole = c.get("/v1/compare", params=q, headers={"Accept-Encoding": "identity"})
        assert int(whole.headers["content-length"]) == len(whole.content)
        assert streamed == whole.content and len(orjson.loads(streamed)["windows"]) == 4560


def test_requests_sharing_a_streamed_answer_share_one_gzip(monkeypatch):
    """Eight readers of one answer's gzip at once: each gets the whole gzip of the JSON, made once
    (the pieces are made by whichever reader needs the next, the others wait for it)."""
    from api import stream

    monkeypatch.setattr(stream, "PIECE", 1000)
    answer = {"step": "1h", "series": [{"time": list(range(i, i + 50))} for i in range(2000)], "note": ""}
    made = []

    def make():
        made.append(1)
        return stream.pieces(answer, "series", 0)

    first = stream.Streamed(make, gz=True)
    others = [first.again(True) for _ in range(7)]
    outs: list[bytes] = [b""] * 8
    assert all(r.family is first.family for r in others)  # what each response's body reads
    threads = [threading.Thread(target=lambda k=k, r=r: outs.__setitem__(k, b"".join(r.family.gz())))
               for k, r in enumerate([first, *others])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(gzip.decompress(o) == orjson.dumps(answer) for o in outs) and len(set(outs)) == 1
    assert len(made) == 1  # one JSON written, one gzip made for the eight
    assert b"".join(first.family.make()) == orjson.dumps(answer)  # a client without gzip: its own JSON


def test_serve_loads_the_table_copies_at_start_and_reloads_them_after_a_write_unasked(store_dir):  # noqa: F811
    """`serve`'s refresher (keep_series_fresh): the hour and day copies are loaded before any
    request, and a write to the hour table is reloaded by the refresher, not by the next request
    (the first answer and the first after a write do not pay the load)."""
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app
    from cachescope.store import tables

    app = create_app(Settings(store_dir=store_dir, series_copy_check_seconds=0.05, answer_cache_seconds=0))
    app.state.keep_series_fresh = True
    index = app.state.series
    with TestClient(app) as c:
        with index.loaded:
            index.loaded.wait_for(lambda: index.warm)
        assert index.loads == 2  # hourly and daily, no request yet
        q = {**HALF_YEAR, "step": "1d"}
        before = c.get("/v1/efficiency", params=q).json()["series"]
        assert index.loads == 2  # answered from the copy loaded at start
        with app.state.stores.get() as store:
            row = store.query(f"SELECT * FROM {tables.EFFICIENCY_DAILY} FINAL WHERE cache_group = 'LONG' "
                              "ORDER BY window_start LIMIT 1").dicts()[0]
            store.insert(tables.EFFICIENCY_DAILY, {k: [v] for k, v in {**row, "run": row["run"] + 1}.items()})
        with index.loaded:
            index.loaded.wait_for(lambda: index.loads == 3)  # the refresher saw the write
        after = c.get("/v1/efficiency", params=q).json()["series"]
        assert index.loads == 3
        assert after[0]["requests"][0] == before[0]["requests"][0] + row["requests"]


def test_the_kept_answers_stay_within_their_byte_bound(store_dir):  # noqa: F811
    """Ten distinct answers of 9,120 points (about 0.67 MB each, not streamed) with a 4 MiB bound:
    the oldest are dropped, the kept ones (with room for their gzip) never pass it."""
    from fastapi.testclient import TestClient

    from api.core.config import Settings
    from api.main import create_app

    app = create_app(Settings(store_dir=store_dir, answer_cache_max_bytes=4 << 20))
    cache = app.state.answers
    with TestClient(app) as c:
        start = dt.datetime.fromisoformat(LONG_FROM.replace("Z", "+00:00"))
        sizes = []
        for k in range(10):
            r = c.get("/v1/efficiency", params={"from": (start + dt.timedelta(hours=k)).isoformat(), "to": LONG_TO,
                                                "step": "1h"}, headers={"Accept-Encoding": "identity"})
            assert r.status_code == 200 and "content-length" in r.headers
            sizes.append(len(r.content))
            kept = sum(e.size() for _, e in cache._done.values())
            assert kept <= 4 << 20, (k, kept)
        assert min(sizes) > 650_000 and 1 < len(cache._done) < 10
