"""Delayed hits (issue 36): the `xcache` model's fetches take time (its `origin_rate`, or each
access's duration), a read that fetched nothing but waited for blocks in flight is a delayed
hit, and every answer counts hits, delayed hits and misses with their bytes. Without fetch times,
and for every other policy, the counts are libCacheSim's / the instant model's."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cachescope.simulation import F, CacheSpec, ShadowBank, load_trace, ratios, simulate
from cachescope.xrdpfc import XrdPfcError, param_value

CLI = [str(Path(sys.executable).parent / "cachescope")]
MB = 10**6


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True)


def test_origin_rate_takes_bytes_and_link_rates():
    assert param_value("origin_rate", "12500000") == 12.5e6
    assert param_value("origin_rate", "100Mbit/s") == 12.5e6
    assert param_value("origin_rate", "1Gbps") == 125e6
    assert param_value("origin_rate", "12.5MB/s") == 12.5e6
    assert param_value("origin_rate", "1MiB/s") == 2**20
    for bad in ("fast", "-3", "10 parsecs/s"):
        with pytest.raises(XrdPfcError, match="origin_rate"):
            param_value("origin_rate", bad)


def _trace(tmp_path: Path) -> Path:
    # a 100 MB file: 40 MB read at t=1 (a miss: 4 s at 10 MB/s), again at t=2 (in flight: a
    # delayed hit), and at t=10 (on disk: a hit); a second file read once (a miss)
    rows = [(1, 1, 100 * MB, 40 * MB), (2, 1, 100 * MB, 40 * MB), (10, 1, 100 * MB, 40 * MB), (11, 2, 50 * MB, 50 * MB)]
    path = tmp_path / "t.csv"
    path.write_text("timestamp,obj_id,obj_size,bytes_read\n" + "".join(f"{t},{i},{s},{b}\n" for t, i, s, b in rows))
    return path


def _simulate(path: Path, policy: str, *params: str) -> dict:
    out = cli("simulate", str(path), "--policy", policy, "--size", "1GB", "--json",
              *[a for p in params for a in ("--param", p)])
    assert out.returncode == 0, out.stderr.decode()
    return json.loads(out.stdout)


def test_simulate_counts_delayed_hits_from_the_origin_rate(tmp_path):
    path = _trace(tmp_path)
    row = _simulate(path, "xcache", "block_size=1MB", "origin_rate=80Mbit/s")
    assert (row["requests"], row["hits"], row["delayed_hits"], row["misses"]) == (4, 1, 1, 2)
    assert row["hit_ratio"] == 0.25 and row["delayed_hit_ratio"] == 0.25
    # at t=2 a quarter of the 40 MB had arrived (1 s of 4): 10 MB hit bytes, 30 MB delayed
    assert (row["bytes_hit"], row["bytes_delayed"]) == (40 * MB + 10 * MB, 30 * MB)
    assert row["bytes_hit"] + row["bytes_delayed"] + row["bytes_missed"] == row["bytes_requested"]
    # a delayed hit costs no second fetch: the WAN bytes are the two misses' blocks
    assert row["bytes_filled"] == 90 * MB
    # the contract's fields are all still there
    for key in ("policy", "size_bytes", "requests", "hits", "hit_ratio", "bytes_requested", "bytes_hit", "byte_hit_ratio"):
        assert key in row
    assert row["by_tier"]["UNKNOWN"]["delayed_hits"] == 1 if "UNKNOWN" in row["by_tier"] else True


def test_without_fetch_times_nothing_is_delayed(tmp_path):
    path = _trace(tmp_path)
    instant = _simulate(path, "xcache", "block_size=1MB")
    assert (instant["hits"], instant["delayed_hits"], instant["misses"]) == (2, 0, 2)
    assert instant["bytes_delayed"] == 0 and instant["bytes_filled"] == 90 * MB
    # the other policies keep libCacheSim's semantics: no fetch times, no delayed hits
    for policy in ("lru", "arc", "s3fifo"):
        row = _simulate(path, policy)
        assert row["delayed_hits"] == 0 and row["misses"] == row["requests"] - row["hits"]


def test_prefetch_in_time_leaves_a_partly_cached_file(tmp_path):
    # prefetch 2 blocks (1 MB) at 8 MB/s: a 20 MB read of a 100 MB file caches 22 MB, so a
    # whole-file read later fetches the other 78 MB; without fetch times prefetch takes it all
    rows = [(1, 1, 100 * MB, 20 * MB), (100, 1, 100 * MB, 100 * MB)]
    path = tmp_path / "p.csv"
    path.write_text("timestamp,obj_id,obj_size,bytes_read\n" + "".join(f"{t},{i},{s},{b}\n" for t, i, s, b in rows))
    timed = _simulate(path, "xcache", "block_size=1MB", "prefetch=2", "origin_rate=64Mbit/s")
    assert (timed["hits"], timed["bytes_hit"]) == (0, 22 * MB)
    instant = _simulate(path, "xcache", "block_size=1MB", "prefetch=2")
    assert (instant["hits"], instant["bytes_hit"]) == (1, 100 * MB)


def test_bank_takes_each_access_duration():
    # no origin rate: the access's own duration is the time its blocks take (40 MB in 4 s)
    n = 3
    ids, size, read = np.ones(n, np.uint64), np.full(n, 100 * MB, np.uint64), np.full(n, 40 * MB, np.uint64)
    zeros = np.zeros(n, np.uint8)
    clock = np.array([1, 2, 10], np.float64)
    spec = CacheSpec("xcache", 10**9, {"block_size": float(MB)})
    counts = []
    for duration in (np.array([4_000_000, 0, 0], np.uint64), None):
        bank = ShadowBank([spec], 1)
        bank.feed_totals(ids, size, read, zeros, zeros, clock=clock, duration_us=duration)
        counts.append(ratios(bank.totals()[0].sum(axis=0)))
    timed, instant = counts
    assert (timed["hits"], timed["delayed_hits"], timed["misses"]) == (1, 1, 1)
    assert (instant["hits"], instant["delayed_hits"], instant["misses"]) == (2, 0, 1)
    assert timed["bytes_filled"] == instant["bytes_filled"] == 40 * MB


def test_golden_counts_unchanged_for_default_semantics(shared_dir):
    # the counters the other fields had before delayed hits: simulate of the lab's trace gives the
    # same hits for the instant xcache whichever way it runs, and no delayed hit anywhere
    trace = load_trace(shared_dir / "xcache-lab/captures/run1-default/workload.sim.csv.gz")
    specs = [CacheSpec(p, 3 * 2**30) for p in ("lru", "fifo", "arc")] + [CacheSpec("xcache", 3 * 2**30, {"prefetch": 10.0})]
    totals = simulate(trace, specs)
    assert (totals[..., F["delayed_hits"]] == 0).all() and (totals[..., F["bytes_delayed"]] == 0).all()
