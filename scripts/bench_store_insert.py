#!/usr/bin/env python
"""Insert rate of access_events-like rows: cachescope.store's wire path against the engines' own
columnar inputs, side by side in one run, on both backends.

Alternatives measured (same rows, same table):
  embedded: Store.insert (wire form through chDB's Python() table function) · chDB reading a plain
            pandas DataFrame of the columns · chDB reading a pyarrow Table of the columns
  server:   Store.insert (wire form through input(), two connections) · clickhouse-driver's
            insert_dataframe (columnar numpy) · clickhouse-driver execute(columnar=True, use_numpy)

    .venv/bin/python scripts/bench_store_insert.py [--rows 1000000] [--repeat 3] [--clickhouse URL] [--store DIR]

Data: what the processing core holds (cachescope.core.columns.EventColumns plus the contract's
other fields): datetime64[us] timestamps, uint64 sizes and ids (above 2^63 too), object arrays of
str for the low-cardinality fields (20 servers, 500 clients, 8 tiers) and distinct-ish paths
(100k files), op as strings, observed_* bytes with half NULL (masked arrays). The server run
needs `scripts/services start clickhouse` (URL from var/services/clickhouse.env by default).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from cachescope.store import migrations, open_store, tables

ROOT = Path(__file__).resolve().parents[1]


def make_rows(n: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    day0 = np.datetime64("today", "D") - np.timedelta64(2, "D")
    ts = day0.astype("datetime64[us]") + np.sort(rng.integers(0, 2 * 86400 * 10**6, n)).astype("timedelta64[us]")
    files = np.array([f"/atlas/rucio/mc23_13p6TeV/{i % 4096:03x}/DAOD_PHYS.{i:08d}._{i % 1000:06d}.pool.root.1"
                      for i in range(100_000)], dtype=object)
    fi = rng.integers(0, 100_000, n)
    mask = rng.random(n) < 0.5

    def pick(values, k):
        return np.array(values, dtype=object)[rng.integers(0, len(values), n)] if k else None

    observed = {c: np.ma.masked_array(rng.integers(0, 2**30, n).astype(np.uint64), mask=mask)
                for c in ("observed_hit_bytes", "observed_miss_bytes", "observed_bypass_bytes")}
    return {
        "ts": ts,
        "site": np.full(n, "TOKYO-LCG2", dtype=object),
        "source": np.full(n, "dcache-billing", dtype=object),
        "server": pick([f"pool{i:02d}.icepp.jp" for i in range(20)], 1),
        "client": pick([f"wn{i:04d}.icepp.jp" for i in range(500)], 1),
        "vo": np.full(n, "atlas", dtype=object),
        "path": files[fi],
        "file_id": (fi.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)),  # spread over all 64 bits
        "file_size": rng.integers(0, 2**34, n, dtype=np.uint64),
        "bytes_read": rng.integers(0, 2**34, n, dtype=np.uint64),
        "op": pick(["read"] * 8 + ["write", "delete"], 1),
        "tier": pick(["DAOD_PHYS", "DAOD_PHYSLITE", "AOD", "HITS", "EVNT", "RDO", "log", "USER"], 1),
        "cache_group": np.full(n, "site", dtype=object),
        **observed,
        "origin": pick([f"file:pool{i:02d}.icepp.jp:/var/log/dcache/billing" for i in range(20)], 1),
        "seq": np.arange(n, dtype=np.uint64),
    }


def _frame(rows: dict):
    """The columns as a plain DataFrame: what a driver's own columnar insert takes."""
    import pandas as pd

    cols = {}
    for k, v in rows.items():
        if isinstance(v, np.ma.MaskedArray):
            cols[k] = pd.array(np.where(v.mask, 0, v.data), dtype="UInt64")
            cols[k][v.mask] = pd.NA
        else:
            cols[k] = v
    return pd.DataFrame(cols)


def bench_alternatives(store, rows: dict, repeat: int) -> dict[str, list[float]]:
    """The engines' own columnar inputs beside Store.insert, each timed `repeat` times."""
    import pyarrow as pa

    migrations.migrate(store)
    n = len(rows["ts"])
    names = ", ".join(rows)
    df = _frame(rows)
    out: dict[str, list[float]] = {}

    def timed(label, fn):
        for _ in range(repeat):
            store.command(f"TRUNCATE TABLE {tables.ACCESS_EVENTS}")
            t = time.perf_counter()
            fn()
            out.setdefault(label, []).append(n / (time.perf_counter() - t))
            assert store.query(f"SELECT count() FROM {tables.ACCESS_EVENTS}").scalar() == n, label

    timed("Store.insert (wire)", lambda: store.insert(tables.ACCESS_EVENTS, rows))
    if store.backend == "embedded":
        table = pa.Table.from_pandas(df, preserve_index=False)

        def chdb_input(obj):
            def run():
                store._run(f"INSERT INTO {tables.ACCESS_EVENTS} ({names}) SELECT {names} FROM Python(cachescope_wire)",
                           fmt="CSV", table=obj)
            return run

        timed("chDB Python(DataFrame)", chdb_input(df))
        timed("chDB Python(Arrow table)", chdb_input(table))
    else:
        client = store._main

        timed("driver insert_dataframe", lambda: client.insert_dataframe(
            f"INSERT INTO {tables.ACCESS_EVENTS} ({names}) VALUES", df, settings={"use_numpy": True}))
        timed("driver execute(columnar, numpy)", lambda: client.execute(
            f"INSERT INTO {tables.ACCESS_EVENTS} ({names}) VALUES", [df[c].to_numpy() for c in df.columns],
            columnar=True, settings={"use_numpy": True}))
    return out


def bench(store, rows: dict, repeat: int) -> list[float]:
    migrations.migrate(store)
    n = len(rows["ts"])
    rates = []
    for i in range(repeat):
        store.command(f"TRUNCATE TABLE {tables.ACCESS_EVENTS}")
        t = time.perf_counter()
        store.insert(tables.ACCESS_EVENTS, rows)
        rates.append(n / (time.perf_counter() - t))
        assert store.query(f"SELECT count() FROM {tables.ACCESS_EVENTS}").scalar() == n
    return rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clickhouse")
    ap.add_argument("--store")
    ap.add_argument("--only", choices=["embedded", "server"])
    a = ap.parse_args()
    rows = make_rows(a.rows)
    url = a.clickhouse
    envf = ROOT / "var" / "services" / "clickhouse.env"
    if url is None and envf.exists():
        url = dict(l.split("=", 1) for l in envf.read_text().split() if "=" in l).get("CLICKHOUSE_URL")
    print(f"{a.rows:,} access_events rows, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    if a.only in (None, "embedded"):
        d = a.store or tempfile.mkdtemp(prefix="cachescope-bench-")
        with open_store(store_dir=d, database="bench") as st:
            r = bench(st, rows, a.repeat)
            for label, rates in bench_alternatives(st, rows, a.repeat).items():
                print(f"  embedded {label:34} " + ", ".join(f"{x:,.0f}" for x in rates) + " rows/s")
        if not a.store:
            shutil.rmtree(d)
        print(f"embedded (chdb {__import__('chdb').__version__}): " + ", ".join(f"{x:,.0f}" for x in r) + " rows/s")
    if a.only in (None, "server") and url:
        with open_store(clickhouse_url=url, database="bench") as st:
            r = bench(st, rows, a.repeat)
            for label, rates in bench_alternatives(st, rows, a.repeat).items():
                print(f"  server {label:36} " + ", ".join(f"{x:,.0f}" for x in rates) + " rows/s")
            st.command("DROP DATABASE bench")
        print(f"server ({url}): " + ", ".join(f"{x:,.0f}" for x in r) + " rows/s")


if __name__ == "__main__":
    main()
