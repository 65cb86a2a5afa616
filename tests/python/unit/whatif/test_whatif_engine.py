"""What-if answers on a fixed store equal those recorded before admission and partitions moved
into the engine's bank (golden numbers: tests/python/snapshots/whatif_engine.json).

The golden file was written by main's code before the change (b95c584: `cachescope/replay.py`
with its Python bypass counting, `_PerServer` banks, `_next_by_server` and `_salted`; the same
numbers as 62ba1e6's `whatif.py`, which had no `bytes_evicted` yet) with
    git show b95c584:cachescope/replay.py > /tmp/replay_main.py
    PYTHONPATH=$PWD python tests/python/unit/whatif/test_whatif_engine.py --write --replay /tmp/replay_main.py
(`--replay`: that file runs in place of cachescope/replay.py, on this checkout's engine and read
layer); without `--replay` it rewrites the file from today's code (only when the numbers are meant
to change). The accesses mix three servers, two cache groups, four tiers, writes and deletes
(some of files the admission filter excludes), over four days, so every path of the replay runs:
admission with warm-up, time steps and several groups; partitions by server (belady's per-server
future), by file hash, both sampled with salted replicas.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np
import pytest

GOLDEN = Path(__file__).resolve().parents[2] / "snapshots" / "whatif_engine.json"
UTC = dt.timezone.utc
T0 = dt.datetime(2023, 11, 14, tzinfo=UTC)
SERVERS = ["xc1.example.org", "xc2.example.org", "xc3.example.org"]
TIERS = ["AOD", "HITS", "USER", "RAW"]
GB = 10**9


def fill(store) -> None:
    """12,000 accesses over four days: zipf reuse, partial reads, 2 % writes and 1 % deletes."""
    from cachescope.store import migrations, tables

    migrations.migrate(store, events_ttl_days=0)
    rng = np.random.default_rng(30)
    n, files = 12_000, 900
    f = np.minimum(rng.zipf(1.25, n) - 1, files - 1)
    size = (1 + (np.arange(files) * 7919) % 45) * GB
    ts = T0.timestamp() * 10**6 + np.sort(rng.integers(0, 4 * 86400 * 10**6, n))
    op = np.where(rng.random(n) < 0.02, 1, np.where(rng.random(n) < 0.01, 2, 0)).astype(np.uint8)
    full = size[f]
    partial = rng.random(n) < 0.3
    bytes_read = np.where(partial, full // 3, full).astype(np.uint64)
    server = rng.integers(0, 3, n)
    group = np.where(f % 5 == 0, "GROUP-B", "GROUP-A")
    store.insert(tables.ACCESS_EVENTS, {
        "ts": ts.astype("datetime64[us]"), "site": ["SITE-W"] * n, "source": ["xrootd"] * n,
        "server": [SERVERS[s] for s in server], "client": [""] * n, "vo": ["cms"] * n,
        "path": [f"/store/f{x}" for x in f], "file_id": (10_000 + f).astype(np.uint64),
        "file_size": full.astype(np.uint64), "bytes_read": bytes_read, "op": op,
        "tier": [TIERS[x % 4] for x in f], "cache_group": group.tolist(),
        "origin": [f"test:{SERVERS[s]}" for s in server], "seq": np.arange(n, dtype=np.uint64)})


def cases():
    from cachescope.admission import AdmissionConfig as Admission

    adm = Admission(exclude_tiers=["USER"], max_file_size=30 * GB)
    both = ["GROUP-A", "GROUP-B"]
    return {
        "plain": dict(policies=["lru", "arc", "belady"], sizes=[200 * GB, 2000 * GB]),
        "admission_warmup_step": dict(policies=["lru", "s3fifo", "belady"], sizes=[300 * GB, 1500 * GB],
                                      admission=adm, warmup=dt.timedelta(days=1), step_s=6 * 3600),
        "groups_admission": dict(policies=["lru", "fifo"], sizes=[500 * GB], cache_groups=both, admission=adm,
                                 step_s=86400),
        "servers_auto": dict(policies=["lru", "belady"], sizes=[600 * GB, 1000 * GB + 2], partitions=3,
                             admission=adm, cache_groups=both),
        "servers_sampled": dict(policies=["lru", "arc"], sizes=[900 * GB + 1], partition_by="server",
                                sample_rate=0.5, admission=adm, warmup=dt.timedelta(hours=12)),
        "servers_belady_warmup": dict(policies=["belady", "lru"], sizes=[700 * GB], partition_by="server",
                                      warmup=dt.timedelta(days=1), step_s=86400),
        "file_hash_sampled": dict(policies=["lru", "s3fifo"], sizes=[800 * GB], partitions=2, sample_rate=0.25,
                                  admission=adm),
        "sampled_admission": dict(policies=["lru", "belady"], sizes=[400 * GB], sample_rate=0.25, admission=adm,
                                  step_s=86400),
    }


def answer(store, kw: dict) -> dict:
    from cachescope.replay import WhatIf, run_whatif

    req = WhatIf(start=T0 + dt.timedelta(days=1) if kw.get("warmup") else T0, end=T0 + dt.timedelta(days=4),
                 chunk=dt.timedelta(hours=20), **kw)
    res = run_whatif(store, req)
    out = {"accesses": res.accesses, "warmup_accesses": res.warmup_accesses, "admitted": res.admitted,
           "servers": res.servers, "results": res.answers()}
    return json.loads(json.dumps(out))  # as JSON holds it (tuples as lists, floats by repr)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from cachescope.store import EmbeddedStore

    s = EmbeddedStore(tmp_path_factory.mktemp("whatif_engine") / "store", database="whatif_engine")
    fill(s)
    yield s
    s.close()


@pytest.mark.parametrize("name", ["plain", "admission_warmup_step", "groups_admission", "servers_auto",
                                  "servers_sampled", "servers_belady_warmup", "file_hash_sampled",
                                  "sampled_admission"])
def test_whatif_answers_equal_the_recorded_ones(store, name):
    want = json.loads(GOLDEN.read_text())[name]
    got = answer(store, cases()[name])
    # the golden answers predate delayed hits: they are compared on their own keys, and the
    # newer counts must say "none" (no cache here has fetch times)
    assert _recorded_keys(got, want) == want
    _no_delayed_hits(got)


_NEWER = {"delayed_hits", "delayed_hit_ratio", "misses", "bytes_delayed", "bytes_missed"}


def _recorded_keys(got, want):
    if isinstance(want, dict) and isinstance(got, dict):
        extra = set(got) - set(want)
        assert extra <= _NEWER, extra
        return {k: _recorded_keys(got[k], want[k]) for k in want if k in got}
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        return [_recorded_keys(g, w) for g, w in zip(got, want)]
    return got


def _no_delayed_hits(got) -> None:
    if isinstance(got, dict):
        if "requests" in got and "delayed_hits" in got:
            assert got["delayed_hits"] == 0 and got["bytes_delayed"] == 0
            assert got["misses"] == got["requests"] - got["hits"]
            assert got["bytes_missed"] == got["bytes_requested"] - got["bytes_hit"]
        for v in got.values():
            _no_delayed_hits(v)
    elif isinstance(got, list):
        for v in got:
            _no_delayed_hits(v)


def test_the_cases_bypass_partition_and_sample(store):
    """The golden cases exercise what they are meant to: excluded reads, writes of excluded
    files, three servers, replicas."""
    golden = json.loads(GOLDEN.read_text())
    assert set(golden) == set(cases())
    adm = golden["admission_warmup_step"]
    assert 0 < adm["admitted"] < adm["accesses"]
    assert golden["servers_auto"]["servers"] == SERVERS
    assert all("by_server" in r and "shared" in r for r in golden["servers_sampled"]["results"])
    assert all(r["sampling"]["hit_ratio_error_bound"] > 0 for r in golden["file_hash_sampled"]["results"])


@pytest.mark.parametrize("name", ["plain", "admission_warmup_step", "servers_sampled", "servers_belady_warmup",
                                  "file_hash_sampled"])
def test_any_number_of_threads_gives_the_answer_of_one(store, name):
    """Every case in one chunk of four days (batches big enough for the caches to run on
    several threads): the answers on 2, 3 and the default (the cores available) threads are
    those on one thread, exactly (the JSON as /v1/whatif gives it)."""
    from cachescope.replay import WhatIf, run_whatif

    kw = cases()[name]
    req = WhatIf(start=T0 + dt.timedelta(days=1) if kw.get("warmup") else T0, end=T0 + dt.timedelta(days=4),
                 chunk=dt.timedelta(days=4), **kw)

    def run(threads: int) -> str:
        res = run_whatif(store, req, threads=threads)
        return json.dumps({"accesses": res.accesses, "admitted": res.admitted, "results": res.answers()})

    one = run(1)
    assert json.loads(one)["accesses"] > 5_000
    for threads in (2, 3, 0):
        assert run(threads) == one, threads


def test_a_replay_runs_its_caches_on_the_threads_asked(store):
    """run_whatif(threads=5) feeds its bank on a pool of five threads (kept for the process,
    named simcore-bank-0 … 4): the fifth exists once it ran, and no pool has a sixth."""
    from cachescope.replay import WhatIf, run_whatif

    def bank_threads() -> set[str]:
        names = set()
        for task in Path("/proc/self/task").iterdir():
            try:
                names.add((task / "comm").read_text().strip())
            except OSError:  # a thread that ended meanwhile
                pass
        return {n for n in names if n.startswith("simcore-bank-")}

    req = WhatIf(["lru", "arc", "s3fifo"], [200 * GB, 2000 * GB], T0, T0 + dt.timedelta(days=4),
                 chunk=dt.timedelta(days=4))
    run_whatif(store, req, threads=5)
    got = bank_threads()
    assert "simcore-bank-4" in got and "simcore-bank-5" not in got, got


@pytest.mark.parametrize("name, want", [
    ("plain", set()),
    ("admission_warmup_step", {"admitted", "ts_us"}),
    ("groups_admission", {"admitted", "ts_us", "group_code"}),
    ("servers_auto", {"admitted", "group_code", "server_code"}),
    ("servers_belady_warmup", {"server_code", "ts_us"}),
])
def test_the_store_reads_only_the_columns_a_replay_feeds(store, monkeypatch, name, want):
    """A replay asks the store for the five columns every bank takes and only those of the
    feed's others its request uses (times for a step, group codes for several groups, server
    codes for partitions by server, the admission flag for a filter); the columns it reads are
    those of the whole feed."""
    from cachescope import reads

    asked: list[set] = []
    real = reads.whatif_feed_chunks

    def recording(*a, **kw):
        asked.append(set(kw["columns"]))
        for part in real(*a, **kw):
            assert set(part) == asked[-1]
            full = next(real(*a, **{**kw, "columns": None}))
            assert all((full[c][:len(part[c])] == part[c]).all() and full[c].dtype == part[c].dtype for c in part)
            yield part

    monkeypatch.setattr(reads, "whatif_feed_chunks", recording)
    answer(store, cases()[name])
    base = {"file_id", "file_size", "bytes_read", "op_code", "tier_code"}
    assert asked and all(a == base | want for a in asked), (asked, base | want)
    with pytest.raises(ValueError, match="not a what-if feed column: tier"):
        next(real(store, T0, T0 + dt.timedelta(days=1), tier_names=TIERS, columns=["file_id", "tier"]))


def test_a_routed_bank_with_bypasses_is_one_bank_per_partition():
    """The Python face: `ShadowBank(partitions=3)` fed a partition column and bypassed reads
    counts as three banks of `capacity_share` each, fed their own rows (belady on each
    partition's own future); `capacity_share` is the split the shards of a group use."""
    from dataclasses import replace

    from cachescope.simulation import OP_BYPASS, CacheSpec, ShadowBank, capacity_share, next_access_times

    rng = np.random.default_rng(5)
    n = 20_000
    fid = rng.integers(0, 500, n).astype(np.uint64)
    size = (1 + fid % 37) * 1000
    tier = (fid % 3).astype(np.uint8)
    op = np.where(rng.random(n) < 0.1, OP_BYPASS, 0).astype(np.uint8)
    part = rng.integers(0, 3, n)
    specs = [CacheSpec("lru", 200_001), CacheSpec("belady", 150_000, sample_rate=0.5)]
    routed = ShadowBank(specs, 3, partitions=3)
    total, per = routed.feed_by_partition(fid, size, size, tier, op, part,
                                          next_access=next_access_times(fid, op=op, partition=part))
    assert per.shape == (3, 2, 3, len(total[0, 0, 0]))
    for p in range(3):
        m = part == p
        own = ShadowBank([replace(s, capacity=capacity_share(s.capacity, 3, p)) for s in specs], 3)
        out = own.feed(fid[m], size[m], size[m], tier[m], op[m], next_access=next_access_times(fid[m], op=op[m]))
        assert (per[p] == out.sum(axis=0)).all(), p
    assert (total.sum(axis=0) == per.sum(axis=0)).all()
    assert per[:, :, :, 1].sum() > 0  # hits
    assert [capacity_share(10, 3, i) for i in range(3)] == [4, 3, 3]


def main() -> None:
    import tempfile

    from cachescope.store import EmbeddedStore

    args = sys.argv[1:]
    if args[:1] != ["--write"] or len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--replay"):
        sys.exit("usage: test_whatif_engine.py --write [--replay PATH]  (rewrites the golden what-if answers)")
    if len(args) == 3:
        import importlib.util

        import cachescope

        spec = importlib.util.spec_from_file_location("cachescope.replay", args[2])
        cachescope.replay = sys.modules["cachescope.replay"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cachescope.replay)
    with tempfile.TemporaryDirectory() as d:
        s = EmbeddedStore(Path(d) / "store", database="whatif_engine")
        fill(s)
        golden = {name: answer(s, kw) for name, kw in cases().items()}
        s.close()
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}: {len(golden)} cases")


if __name__ == "__main__":
    main()
