"""API benchmarks: what-if replays over stored accesses, and /v1/efficiency under concurrent load.

    .venv/bin/python scripts/bench_api.py --store var/bench-api             # embedded store (chDB)
    .venv/bin/python scripts/bench_api.py --clickhouse clickhouse://127.0.0.1:9000 --database bench_api

1. Fills the store (once; --refill to redo): N synthetic access_events rows over D days (numpy
   columns straight into store.insert), and efficiency rows for 30 days × 24 configurations × 8
   tiers at the minute... day tables (hourly and daily; the 1h step reads the hourly table).
2. Times the what-if library (the store read included): one configuration (10 TB ARC) and 24
   (6 policies × 4 sizes), with read and engine seconds and the process's peak RSS; each in the
   variants of --whatif-variants in turn (default: the caches on one thread and on the cores
   available with the read of every feed column as before, then the current code), --whatif-repeat
   rounds, the answers checked identical, then the medians side by side and their ratios.
3. Starts `cachescope serve` on the store and runs a load generator (wrk when installed, else or
   also httpx with --python-load): C connections on /v1/efficiency at 1h over 28-30 days, each
   request a different query (range start, policy, size: an answer cache cannot carry it), then
   one query repeated (what the answer cache does); with the in-process table copy (the default)
   and without it (SQL per request); prints p50/p95/p99 and requests/s; before them, the first
   answer of the fresh server (cold: the copy's load in it) and rounds of one new query asked by
   every client at once (computed once, joined by the others).
4. `--against REV` (same Rust sources): REV's tree is exported beside this one and run
   alternately with it (`--repeat` rounds): the what-if cases in a process of each tree, each
   serve case on REV's code first, then on the current code. `--this-engine`: REV's Python on
   this checkout's engine (a Rust change that keeps the interface REV calls).

    .venv/bin/python scripts/bench_api.py --store var/bench-api --against main --repeat 3 --skip-whatif
    .venv/bin/python scripts/bench_api.py --store var/bench-api --against 775b066 --this-engine --skip-load

5. `--cold-load N`: the cold answer's parts in process, the table copy's load before session 17
   (names as strings, GROUP BY on them) and the current one alternately, N rounds, answers checked
   identical (what --against shows end to end, without the HTTP client on the same cores).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import os
import resource
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

START = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
GROUP = "BENCH-XCACHE"
TIERS = np.array(["AOD", "DAOD_PHYS", "HITS", "USER", "RAW", "MINIAOD", "NANOAOD", "PREMIX"], dtype=object)
POLICIES = ["lru", "arc", "s3fifo", "sieve", "wtinylfu", "xcache"]
SIZES = [10**12, 5 * 10**12, 10**13, 5 * 10**13]


#: wrk's summary with the 95th percentile (its --latency prints 50/75/90/99 only)
WRK_LUA = """done = function(summary, latency, requests)
  io.write(string.format("wrk: %d requests, %.1f req/s, p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, errors %d\\n",
    summary.requests, summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000,
    latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.timeout))
end
"""


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def open_store(args):
    from cachescope.store import open_store as o

    return o(store_dir=args.store, database=args.database) if args.store else \
        o(clickhouse_url=args.clickhouse, database=args.database)


def fill_accesses(store, n: int, days: int, files: int, seed: int = 1) -> float:
    from cachescope.store import tables

    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    ids = rng.integers(1, 2**63, size=files, dtype=np.uint64)
    sizes = rng.integers(10**8, 10**10, size=files, dtype=np.uint64)
    start_us = int(START.timestamp() * 1e6)
    chunk = 2_000_000  # bounded memory while filling
    for a in range(0, n, chunk):
        m = min(chunk, n - a)
        ranks = np.minimum(rng.zipf(1.2, m) - 1, files - 1)
        span = days * 86_400 * 10**6
        ts = np.sort(rng.integers(start_us + span * a // n, start_us + span * (a + m) // n, m)).astype("datetime64[us]")
        fs = sizes[ranks]
        store.insert(tables.ACCESS_EVENTS, {
            "ts": ts, "site": np.full(m, "BENCH", dtype=object), "source": np.full(m, "xrootd", dtype=object),
            "server": np.array([f"xcache-{i}" for i in range(4)], dtype=object)[ranks % 4],
            "client": np.full(m, "", dtype=object), "vo": np.full(m, "cms", dtype=object),
            "path": np.full(m, "", dtype=object), "file_id": ids[ranks], "file_size": fs,
            "bytes_read": np.where(rng.random(m) < 0.3, fs // 3, fs).astype(np.uint64),
            "op": np.zeros(m, np.uint8), "tier": TIERS[ranks % 8], "cache_group": np.full(m, GROUP, dtype=object),
            "origin": np.array([f"file:host{i}:/var/log/xrootd.log" for i in range(4)], dtype=object)[ranks % 4],
            "seq": np.arange(a, a + m, dtype=np.uint64)})
    return time.perf_counter() - t0


def fill_efficiency(store, days: int = 30) -> int:
    """days × 24 configurations × 8 tiers, hourly and daily rows (as the core writes them)."""
    from cachescope.store import tables

    rng = np.random.default_rng(2)
    n = 0
    for table, length in ((tables.EFFICIENCY_HOURLY, 3600), (tables.EFFICIENCY_DAILY, 86_400)):
        windows = np.arange(int(START.timestamp()), int(START.timestamp()) + days * 86_400, length)
        pol, size, tier, win = np.meshgrid(np.arange(len(POLICIES)), np.arange(len(SIZES)), np.arange(8),
                                           windows, indexing="ij")
        m = win.size
        req = rng.integers(100, 10_000, m).astype(np.uint64) * (length // 3600)
        hits = (req * rng.uniform(0.3, 0.9, m)).astype(np.uint64)
        breq = req * np.uint64(3 * 10**9)
        n += store.insert(table, {
            "window_start": win.reshape(-1).astype("datetime64[s]"),
            "window_end": (win.reshape(-1) + length).astype("datetime64[s]"),
            "cache_group": np.full(m, GROUP, dtype=object), "policy": np.array(POLICIES, dtype=object)[pol.reshape(-1)],
            "size_bytes": np.array(SIZES, dtype=np.uint64)[size.reshape(-1)], "tier": TIERS[tier.reshape(-1)],
            "sample_rate": np.ones(m), "partitions": np.ones(m, np.uint32), "requests": req.reshape(-1),
            "hits": hits.reshape(-1), "bytes_requested": breq.reshape(-1),
            "bytes_hit": (hits * np.uint64(3 * 10**9)).reshape(-1), "bytes_filled": np.zeros(m, np.uint64),
            "evictions": np.zeros(m, np.uint64), "bytes_evicted": np.zeros(m, np.uint64)})
    return n


def bench_whatif(store, days: int, weeks_label: str, configs: list[int], variants: list[str] = ("0",),
                 repeat: int = 1) -> None:
    """Each case in each variant in turn (`repeat` rounds, alternating: the host's load hits them
    alike), the answers checked equal, then the median of each and its ratio to the first. A
    variant is a thread count of the caches (0: the cores available, the default setting), with
    `+all` the store read of every feed column (the read before 2026-12-02) instead of the
    columns the replay needs."""
    import json
    import statistics

    from cachescope import reads
    from cachescope.replay import WhatIf, run_whatif, scope

    try:
        from cachescope.replay import available_cores
    except ImportError:  # a revision before the setting (--against): its caches took rayon's pool
        available_cores = os.cpu_count

    end = START + dt.timedelta(days=days)
    cases = {1: ("1 configuration (arc 10TB)", ["arc"], [10**13]),
             24: ("24 configurations (6 policies x 4 sizes)", POLICIES, SIZES)}
    cores = available_cores()
    needed = reads.whatif_feed_chunks

    def every_column(*a, **kw):
        kw.pop("columns", None)
        return needed(*a, **kw)

    def name(v: str) -> str:
        t, _, read = v.partition("+")
        if available_cores is os.cpu_count:
            return "its own code (the caches on rayon's pool, every feed column read)"
        return f"threads={int(t) or cores}{'' if int(t) else ' (default)'}, " + \
            ("every feed column (before)" if read == "all" else "the columns it needs")

    for label, policies, sizes in (cases[c] for c in configs):
        req = WhatIf(policies, sizes, START, end, cache_groups=[GROUP])
        walls: dict[str, list[float]] = {v: [] for v in variants}
        answers: dict[str, str] = {}
        for _ in range(repeat):
            for v in variants:
                reads.whatif_feed_chunks = every_column if v.endswith("+all") else needed
                try:
                    t0, c0 = time.perf_counter(), _cpu()
                    n, tiers = scope(store, req)
                    t = int(v.partition("+")[0])
                    res = run_whatif(store, req, tier_names=tiers, **({"threads": t} if t else {}))
                    total, cpu = time.perf_counter() - t0, _cpu() - c0
                finally:
                    reads.whatif_feed_chunks = needed
                walls[v].append(total)
                answers.setdefault(v, json.dumps(res.answers()))
                if answers[v] != answers[variants[0]]:
                    raise SystemExit(f"what-if {label}: the answer of {name(v)} differs from that of "
                                     f"{name(variants[0])}")
                a = res.answers()[0]
                print(f"what-if {weeks_label}, {label}, {name(v)}: {total:.2f} s end to end, CPU {cpu:.2f} s "
                      f"({res.accesses:,} accesses; store read {res.read_seconds:.2f} s, engine "
                      f"{res.engine_seconds:.2f} s); first hit ratio {a['hit_ratio']:.4f}; peak RSS "
                      f"{rss_mb():,.0f} MB; load {os.getloadavg()[0]:.1f}", flush=True)
        if len(variants) > 1 or repeat > 1:
            med = {v: statistics.median(w) for v, w in walls.items()}
            base = variants[0]
            print(f"what-if {weeks_label}, {label}: medians of {repeat}: " + "; ".join(
                f"{name(v)} {med[v]:.2f} s ({med[base] / med[v]:.2f}x)" for v in variants) +
                " — answers identical", flush=True)


def _cpu() -> float:
    """CPU seconds of this process so far (all its threads: the store's and the engine's)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def load(url: str, params: dict, clients: int, requests: int, headers: dict) -> list[float]:
    """Latencies of `requests` GETs of one query from `clients` connections."""
    return await load_many(url, [params] * requests, clients, headers)


def varied_queries(case: str, n: int, seed: int = 3) -> list[dict]:
    """n distinct parameter sets of a case (up to 1,152): ranges of about 28 days starting at a
    different hour of the first two days, and a different policy and size (one series set) or
    length (the others): no two requests alike, so an answer cache cannot carry the load."""
    import random

    rng = random.Random(seed)
    # one series set: a start hour, a policy, a size; the others: a start hour and a length (28 days
    # less 0-23 hours)
    combos = [(h, p, s) for h in range(48) for p in POLICIES for s in SIZES] if case == "one" else \
        [(h, k, None) for h in range(48) for k in range(24)]
    rng.shuffle(combos)
    out = []
    for h, p, s in combos[:n]:
        a = START + dt.timedelta(hours=h)
        length = dt.timedelta(days=28) - (dt.timedelta(0) if case == "one" else dt.timedelta(hours=p))
        q = {"from": a.isoformat(), "to": (a + length).isoformat(), "step": "1h", "cache_group": GROUP}
        if case == "one":
            q.update(policy=p, size=str(s), by_tier="true")
        elif case == "tiers":
            q["by_tier"] = "true"
        out.append(q)
    return out


#: wrk: each request the next path of a list (varied queries), with the summary above
WRK_PATHS_LUA = """paths = {}
for line in io.lines("%s") do paths[#paths + 1] = line end
-- each wrk thread starts at its own place in the list (else the threads ask the same in step)
local threads = 0
setup = function(thread)
  thread:set("offset", threads * 577)
  threads = threads + 1
end
init = function(args)
  i = offset or 0
end
request = function()
  i = i %% #paths + 1
  return wrk.format("GET", paths[i])
end
"""


def bench_serve(args, cache_seconds: float, copy: bool = True, tree: Path = REPO, rev: str = "current") -> None:
    from urllib.parse import urlencode

    port = free_port()
    env = dict(os.environ)
    env["CACHESCOPE_ANSWER_CACHE_SECONDS"] = str(cache_seconds)
    env["CACHESCOPE_SERIES_COPY_MAX_ROWS"] = "1000000" if copy else "0"
    # 16 clients of the largest answer queue for the 8 slots (a streamed answer holds its slot until
    # the client has read it): they wait instead of taking the default 2 s wait's 503
    env.setdefault("CACHESCOPE_API__BUSY_WAIT_SECONDS", "120")
    mode = f"{rev}, " + (f"answer cache {cache_seconds:g} s" if cache_seconds else "answer cache off") + \
        (", table copy" if copy else ", SQL per request (copy off)")
    headers = {}
    cmd = [str(Path(sys.executable).parent / "cachescope"), "serve", "--port", str(port), "--database", args.database]
    if args.store:
        cmd += ["--store", str(args.store)]
        env.pop("CACHESCOPE_API_TOKENS", None)
    else:
        token = secrets.token_urlsafe(24)
        env["CACHESCOPE_API_TOKENS"] = hashlib.sha256(token.encode()).hexdigest() + ":read+whatif"
        headers = {"Authorization": f"Bearer {token}"}
        cmd += ["--clickhouse", args.clickhouse]
    env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stderr=subprocess.PIPE, text=True)
    try:
        import httpx

        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                if proc.poll() is not None:
                    raise SystemExit(proc.stderr.read())
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/v1/efficiency"
        base = {"from": START.isoformat(), "to": (START + dt.timedelta(days=30)).isoformat(), "step": "1h",
                "cache_group": GROUP}
        cases = (("one", "one series set: 1 policy x 1 size x 8 tiers (5,760 points)",
                  {**base, "policy": "arc", "size": "10TB", "by_tier": "true"}),
                 ("summed", "24 configurations, tiers summed (17,280 points)", base),
                 ("tiers", "24 configurations x 8 tiers (138,240 points)", {**base, "by_tier": "true"}))
        cold = True
        for case, label, params in cases:
            if args.cases and case not in args.cases.split(","):
                continue
            if cold:  # the first answer of a fresh server: the store's query and the copy's load in it
                t0 = time.perf_counter()
                asyncio.run(load(url, params, 1, 1, headers))
                print(f"[{store_label(args)}, {mode}] /v1/efficiency {label}: cold first answer "
                      f"{(time.perf_counter() - t0) * 1000:.0f} ms", flush=True)
                cold = False
            asyncio.run(load(url, params, 2, 4, headers))  # warm
            # a query no one asked yet, by every client at once: computed once, the others join it
            # (and take its gzip); rounds of distinct ranges, none asked by the loads below
            lat = []
            for r in range(args.coalesced):
                q = {**params, "from": (START + dt.timedelta(hours=60 + r)).isoformat()}
                lat += asyncio.run(load(url, q, args.clients, args.clients, headers))
            if lat:
                p = np.percentile(np.array(lat) * 1000, [50, 95])
                print(f"[{store_label(args)}, {mode}] /v1/efficiency {label}, {args.coalesced} new queries each asked "
                      f"by {args.clients} clients at once: p50 {p[0]:.1f} ms, p95 {p[1]:.1f} ms, max "
                      f"{max(lat) * 1000:.1f} ms", flush=True)
            for varied in (True, False):
                if not varied and not cache_seconds:
                    continue  # identical requests matter only to show what the answer cache does
                queries = varied_queries(case, 1152) if varied else [params]
                what = f"{len(queries)} varied queries" if varied else "one query repeated"
                if shutil.which("wrk"):  # a native load generator: the Python one costs the server's cores
                    tmp = Path(tempfile.mkdtemp())
                    (tmp / "paths").write_text("".join(f"/v1/efficiency?{urlencode(q)}\n" for q in queries))
                    (tmp / "p95.lua").write_text(WRK_PATHS_LUA % (tmp / "paths") + WRK_LUA)
                    auth = [f"-H", f"Authorization: {headers['Authorization']}"] if headers else []
                    out = subprocess.run(["wrk", "-t2", f"-c{args.clients}", f"-d{args.seconds}s", "--timeout", "60s",
                                          "-H", "Accept-Encoding: gzip", *auth, "-s", str(tmp / "p95.lua"),
                                          f"http://127.0.0.1:{port}"], capture_output=True, text=True)
                    shutil.rmtree(tmp)
                    print(f"[{store_label(args)}, {mode}] /v1/efficiency {label}, {what}, {args.clients} connections, "
                          f"{out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr.strip()}",
                          flush=True)
                if args.python_load:
                    n = args.requests if case == "one" else max(32, args.requests // 8)
                    todo = [queries[i % len(queries)] for i in range(n)]
                    t0 = time.perf_counter()
                    lat = asyncio.run(load_many(url, todo, args.clients, headers))
                    wall = time.perf_counter() - t0
                    p = np.percentile(np.array(lat) * 1000, [50, 95, 99])
                    print(f"[{store_label(args)}, {mode}] /v1/efficiency {label}, {what}, {args.clients} clients "
                          f"(httpx), {n} requests: p50 {p[0]:.1f} ms, p95 {p[1]:.1f} ms, p99 {p[2]:.1f} ms, "
                          f"{n / wall:.1f} requests/s", flush=True)
        if args.skip_whatif:
            return
        t0 = time.perf_counter()
        r = httpx.post(f"http://127.0.0.1:{port}/v1/whatif", headers=headers, timeout=600,
                       json={"policy": "arc", "size": "10TB", "from": START.isoformat(),
                             "to": (START + dt.timedelta(days=args.days)).isoformat(), "cache_group": GROUP})
        print(f"[{store_label(args)}] POST /v1/whatif over HTTP (arc 10TB, {args.days} days): HTTP {r.status_code} in "
              f"{time.perf_counter() - t0:.2f} s", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


async def load_many(url: str, queries: list[dict], clients: int, headers: dict) -> list[float]:
    """Latencies of GETs from `clients` connections, each request the next parameter set of `queries`."""
    import httpx

    lat: list[float] = []
    todo = iter(queries)

    async def worker(c):
        for params in todo:
            t0 = time.perf_counter()
            r = await c.get(url, params=params, headers=headers)
            lat.append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise SystemExit(f"{url}: HTTP {r.status_code}: {r.text[:300]}")

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as c:
        await asyncio.gather(*(worker(c) for _ in range(clients)))
    return lat


def export_rev(rev: str, this_engine: bool = False) -> Path:
    """REV's tree (git archive) beside this one, with this checkout's built engine: the code to
    compare with, run alternately with the current one. REV must have the same Rust sources, or
    with `this_engine` its simcore/src is replaced by this checkout's (REV's Python on today's
    engine: for an engine change that keeps the interface REV calls)."""
    if not this_engine and subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", rev, "--",
                                           "simcore/src"]).returncode != 0:
        raise SystemExit(f"--against {rev}: its simcore/src differs from this checkout's (only Python changes "
                         "compare here: build that revision in its own checkout, or give --this-engine)")
    dst = Path(tempfile.mkdtemp(prefix="bench-api-against-"))
    tar = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dst)], input=tar, check=True)
    if this_engine:
        shutil.rmtree(dst / "simcore" / "src")
        shutil.copytree(REPO / "simcore" / "src", dst / "simcore" / "src")
    for so in (REPO / "cachescope").glob("_simcore*.so"):
        shutil.copy2(so, dst / "cachescope" / so.name)
    where = subprocess.run([sys.executable, "-c", "import api, cachescope; print(cachescope.__file__, api.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(dst)}, cwd=dst, capture_output=True, text=True, check=True)
    if not all(x.startswith(str(dst)) for x in where.stdout.split()):
        raise SystemExit(f"--against {rev}: the exported tree is not the one imported ({where.stdout.strip()})")
    return dst


#: the copy's load before session 17: the names as strings, summed by a GROUP BY on them
OLD_ROWS_SQL = ("SELECT toUnixTimestamp(window_start) AS ws, cache_group, policy, size_bytes, tier, "
                "sum(requests) AS requests, sum(hits) AS hits, sum(bytes_requested) AS bytes_requested, "
                "sum(bytes_hit) AS bytes_hit, sum(bytes_filled) AS bytes_filled, sum(evictions) AS evictions "
                "FROM {table} FINAL GROUP BY window_start, cache_group, policy, size_bytes, tier")


def bench_cold_load(args) -> None:
    """The cold answer's parts in process, the old load and the new alternately (`--cold-load N`
    rounds): the store's query, the copy's build, then the answer (select, JSON) of the three load
    cases; the old and new copies' answers checked byte-identical."""
    from api import series_index as si
    from cachescope import reads
    from cachescope.store import tables

    store = open_store(args)
    table = tables.EFFICIENCY_HOURLY
    start, end = START, START + dt.timedelta(days=30)
    cases = {"one": dict(cache_groups=[GROUP], policies=["arc"], sizes=[10**13], by_tier=True),
             "summed": dict(cache_groups=[GROUP]), "tiers": dict(cache_groups=[GROUP], by_tier=True)}
    times: dict[str, list[float]] = {}

    def timed(label, f):
        t0 = time.perf_counter()
        out = f()
        times.setdefault(label, []).append((time.perf_counter() - t0) * 1000)
        return out

    try:
        for _ in range(args.cold_load):
            df = timed("old: store query (strings, GROUP BY)", lambda: store.query_frame(OLD_ROWS_SQL.format(table=table)))
            old = timed("old: copy build", lambda: si.TableCopy(df, (0,)))
            rows, names = timed("new: store query (names as places, no GROUP BY)", lambda: reads.efficiency_rows(store, table))
            new = timed("new: copy build (sums in the sort)", lambda: si.TableCopy(rows, (0,), names))
            for case, kw in cases.items():
                a = timed(f"answer {case}: select + JSON", lambda: si.dumps(
                    {"series": new.series_json(start, end, 3600, **kw)}))
                assert a == si.dumps({"series": old.series_json(start, end, 3600, **kw)}), case
    finally:
        store.close()
    for label, ms in times.items():
        print(f"[{store_label(args)}, in process, {args.cold_load} rounds] {label}: median {np.median(ms):.1f} ms, "
              f"min {min(ms):.1f} ms", flush=True)
    load = {k: float(np.median(v)) for k, v in times.items()}
    old_total = load["old: store query (strings, GROUP BY)"] + load["old: copy build"]
    new_total = load["new: store query (names as places, no GROUP BY)"] + load["new: copy build (sums in the sort)"]
    print(f"[{store_label(args)}, in process] the copy's load (medians): old {old_total:.0f} ms, new {new_total:.0f} ms "
          f"({old_total / new_total:.1f}x); answers identical", flush=True)


def store_label(args) -> str:
    return "chDB" if args.store else "ClickHouse server"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, help="embedded store directory")
    ap.add_argument("--clickhouse", help="ClickHouse server URL")
    ap.add_argument("--database", default="bench_api")
    ap.add_argument("--rows", type=int, default=7_000_000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--files", type=int, default=600_000)
    ap.add_argument("--refill", action="store_true")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--skip-whatif", action="store_true")
    ap.add_argument("--cache", default="0,15", help="answer cache seconds to run the load with (0: off)")
    ap.add_argument("--configs", default="1,24", help="what-if cases: 1 and/or 24 configurations")
    ap.add_argument("--whatif-variants", default="1+all,0+all,0", help="what-if: variants to run each case in, in "
                    "turn: a thread count of the caches (0: the cores available, the default setting; 1: one "
                    "thread), `+all` for the store read of every feed column (the read before 2026-12-02)")
    ap.add_argument("--whatif-repeat", type=int, default=3, help="what-if: rounds over the variants")
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--seconds", type=int, default=10, help="wrk run length per case")
    ap.add_argument("--cases", default="", help="load cases (one, summed, tiers; default all)")
    ap.add_argument("--copy", default="on,off", help="table copy of /v1/efficiency on and/or off (SQL per request)")
    ap.add_argument("--python-load", action="store_true", help="also the httpx load generator (wrk is used when present)")
    ap.add_argument("--against", metavar="REV", help="also run revision REV (same Rust sources), alternately with "
                    "the current code: what-if in a process of its own, each serve case before the current one")
    ap.add_argument("--this-engine", action="store_true", help="with --against: REV's Python on this checkout's "
                    "engine (for a Rust change that keeps the interface REV's code calls)")
    ap.add_argument("--coalesced", type=int, default=5, help="rounds of one new query asked by every client at once")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the comparison (with --against)")
    ap.add_argument("--cold-load", type=int, default=0, metavar="N", help="N rounds of the cold answer's parts in "
                    "process, the table copy's old load (names as strings, GROUP BY) and the new one alternately")
    args = ap.parse_args()
    if (args.store is None) == (args.clickhouse is None):
        ap.error("give exactly one of --store or --clickhouse")
    args.store = args.store.resolve() if args.store else None  # the old revision runs in its own directory
    from cachescope.store import migrations, tables

    store = open_store(args)
    migrations.migrate(store, events_ttl_days=0)
    have = store.query(f"SELECT count() FROM {tables.ACCESS_EVENTS}").scalar()
    if args.refill or have != args.rows:
        for t in (tables.ACCESS_EVENTS, tables.EFFICIENCY_HOURLY, tables.EFFICIENCY_DAILY):
            store.command(f"TRUNCATE TABLE {t}")
        s = fill_accesses(store, args.rows, args.days, args.files)
        print(f"filled {args.rows:,} access_events rows over {args.days} days in {s:.1f} s "
              f"({args.rows / s:,.0f} rows/s)", flush=True)
        print(f"filled {fill_efficiency(store):,} efficiency rows (30 days x 24 configurations x 8 tiers, hourly "
              "and daily)", flush=True)
        store.command(f"OPTIMIZE TABLE {tables.ACCESS_EVENTS} FINAL")
    print(f"backend {store.backend}; {store.query(f'SELECT count() FROM {tables.ACCESS_EVENTS}').scalar():,} "
          f"stored accesses; peak RSS {rss_mb():,.0f} MB", flush=True)
    store.close()  # chDB: one process per store directory; `serve` (or the what-if process) opens it next
    if args.cold_load:
        bench_cold_load(args)
    old = export_rev(args.against, args.this_engine) if args.against else None
    try:
        for _ in range(args.repeat if old else 1):
            if not args.skip_whatif:
                for tree, rev in ((old, args.against), (REPO, "current")) if old else ((REPO, "current"),):
                    whatif_process(args, tree, rev)
            if not args.skip_load:
                for copy in args.copy.split(","):
                    for seconds in args.cache.split(","):
                        if old:
                            bench_serve(args, float(seconds), copy == "on", old, args.against)
                        bench_serve(args, float(seconds), copy == "on")
    finally:
        if old:
            shutil.rmtree(old, ignore_errors=True)


def whatif_process(args, tree: Path, rev: str) -> None:
    """The what-if cases in a process of their own, on `tree`'s code (peak RSS its own)."""
    code = ("import sys; sys.argv[0] = 'bench_api'; import runpy; m = runpy.run_path(sys.argv.pop(1)); "
            "s = m['open_store'](m['_Args'](*sys.argv[1:3])); "
            "m['bench_whatif'](s, int(sys.argv[3]), sys.argv[3] + ' days', [int(c) for c in sys.argv[4].split(',')], "
            "*([sys.argv[5].split(','), int(sys.argv[6])] if len(sys.argv) > 5 else []))")
    store = ["--store", str(args.store)] if args.store else ["--clickhouse", args.clickhouse]
    # the tree's own script: it puts its tree first on sys.path (this one would import today's code)
    out = subprocess.run([sys.executable, "-c", code, str(tree / "scripts" / "bench_api.py"),
                          str(args.store or ""), args.clickhouse or "", str(args.days), args.configs,
                          *([args.whatif_variants, str(args.whatif_repeat)] if rev == "current" else [])],
                         env={**os.environ, "PYTHONPATH": str(tree), "BENCH_API_DATABASE": args.database},
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"what-if on {rev}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    for line in out.stdout.splitlines():
        print(f"[{rev}] {line}", flush=True)
    del store


class _Args:
    """The store arguments of a what-if process."""

    def __init__(self, store: str, clickhouse: str):
        self.store = Path(store) if store else None
        self.clickhouse = clickhouse or None
        self.database = os.environ.get("BENCH_API_DATABASE", "bench_api")


if __name__ == "__main__":
    main()
