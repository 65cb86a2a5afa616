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


# --- the contract's duration_us, from the records that state it -------------------------------

_GSTREAM = ('{"event":"file_close","lfn":"/store/mc/X/Y/AODSIM/v1/0000/a.root","size":10485760,"blk_size":1048576,'
            '"n_blks":10,"n_blks_done":10,"access_cnt":1,"attach_t":1795769566,"detach_t":1795769570,'
            '"remotes":["127.0.0.1:1094"],"b_hit":0,"b_miss":10485760,"b_bypass":0}')


def test_gstream_duration_is_detach_minus_attach_in_both_parsers():
    from ingest.pipeline import LineParser

    lines = [_GSTREAM, _GSTREAM.replace('"detach_t":1795769570', '"detach_t":1795769560'),
             _GSTREAM.replace(',"detach_t":1795769570', "")]
    python = [e.duration_us for e in LineParser("xrootd-gstream", server="c1").parse_all(lines)]
    assert python == [4_000_000, None, None]
    # the compiled path (column_batches) gives the same column, null as -1
    cols = [c for c in LineParser("xrootd-gstream", server="c1").column_batches(lines)]
    compiled = np.concatenate([c.duration_us for c in cols]).tolist()
    assert compiled == [4_000_000, -1, -1]


def test_dcache_billing_duration_is_the_movers_connection_time(tmp_path):
    from ingest.pipeline import LineParser

    line = ("08.05 07:47:55 [pool:pool1:transfer] [0000FA09235CA0974697AB93F00FFEA61620,964544] "
            "[/home/tester/test-file-1] <Unknown>:<Unknown>@osm 964544 74 false "
            "{Http-1.1:0:0:0:0:0:0:0:1:0:WebDAV-dcache:dCacheDomain:/home/tester/test-file-1} "
            "[door:WebDAV-dcache@dCacheDomain:AAWPWe0LXwA:1564991275384000] {0:\"\"}")
    parser = LineParser("dcache-billing", year=2019)
    events = parser.parse_all([line])
    assert [e.duration_us for e in events] == [74_000]
    compiled = np.concatenate([c.duration_us for c in LineParser("dcache-billing", year=2019).column_batches([line])])
    assert compiled.tolist() == [74_000]


def test_duration_travels_in_messages_and_old_messages_read_as_null():
    from cachescope.core.columns import EventColumns
    from cachescope.core.messages import decode_batch as decode_message, encode_batch as encode_events
    from cachescope.events import AccessEvent

    ev = AccessEvent(1_700_000_000_000_000, "S", "csv", "srv", "", "cms", "/p", 1, 100, 50, "read", "AOD", "g",
                     None, None, None, None, None, "file:h:/x", 0, 2_500_000)
    group, cols = decode_message(encode_events("g", [ev, AccessEvent(*[getattr(ev, f) for f in ev.__struct_fields__][:-1])]))
    assert cols.duration_us.tolist() == [2_500_000, -1]
    # a message from before the field: no duration_us column at all
    import orjson

    doc = orjson.loads(encode_events("g", [ev]))
    del doc["columns"]["duration_us"]
    _, old = decode_message(orjson.dumps(doc))
    assert old.duration_us.tolist() == [-1]
    assert isinstance(cols, EventColumns) and group == "g"


def test_whatif_of_an_xcache_with_an_origin_rate_counts_delayed_hits(tmp_path):
    import datetime as dt

    from cachescope.replay import WhatIf, run_whatif
    from cachescope.store import EmbeddedStore, migrations, tables

    store = EmbeddedStore(tmp_path / "store", database="delayed")
    try:
        migrations.migrate(store, events_ttl_days=0)
        t0 = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
        # the _trace rows (t = 1, 2, 10, 11 s), stored; the first access lasted 4 s (its duration)
        rows = [(1, 1, 100 * MB, 40 * MB, 4_000_000), (2, 1, 100 * MB, 40 * MB, None),
                (10, 1, 100 * MB, 40 * MB, None), (11, 2, 50 * MB, 50 * MB, None)]
        n = len(rows)
        store.insert(tables.ACCESS_EVENTS, {
            "ts": np.array([int(t0.timestamp() + r[0]) * 10**6 for r in rows]).astype("datetime64[us]"),
            "site": ["S"] * n, "source": ["xrootd-gstream"] * n, "server": ["xc"] * n, "client": [""] * n,
            "vo": ["cms"] * n, "path": [f"/store/f{r[1]}" for r in rows],
            "file_id": np.array([r[1] for r in rows], np.uint64), "file_size": np.array([r[2] for r in rows], np.uint64),
            "bytes_read": np.array([r[3] for r in rows], np.uint64), "op": np.zeros(n, np.uint8),
            "tier": ["AOD"] * n, "cache_group": ["g"] * n, "origin": ["test"] * n, "seq": np.arange(n, dtype=np.uint64),
            "duration_us": np.ma.masked_array([r[4] or 0 for r in rows], mask=[r[4] is None for r in rows])})

        def ask(params: dict) -> dict:
            req = WhatIf(start=t0, end=t0 + dt.timedelta(minutes=1), policies=["xcache"], sizes=[10**9],
                         params={"xcache": {"block_size": float(MB), **params}})
            return run_whatif(store, req).answers()[0]

        # a fast origin: the stored duration of the first access (4 s) still makes t=2 wait
        timed = ask({"origin_rate": 1e12})
        assert (timed["hits"], timed["delayed_hits"], timed["misses"]) == (1, 1, 2), timed
        assert timed["by_tier"]["AOD"]["delayed_hits"] == 1
        # a slow one (1 MB/s: 40 MB would take 40 s): the known duration still decides
        slow = ask({"origin_rate": 1e6})
        assert (slow["hits"], slow["delayed_hits"], slow["misses"]) == (1, 1, 2), slow
        # without a rate a what-if feeds no times: instant, as before
        instant = ask({})
        assert (instant["hits"], instant["delayed_hits"], instant["misses"]) == (2, 0, 2), instant
    finally:
        store.close()


# --- a storage element's f-stream: open..close where its packets pin it down (issue 36) ---------

def _fstream_datagram(pseq: int, stod: int, tbeg: int, tend: int, *records: bytes) -> bytes:
    import struct

    tod = struct.pack(">bbhI", 2, 0, 24, 0) + struct.pack(">iiq", tbeg, tend, 7)
    body = tod + b"".join(records)
    return struct.pack(">cBHi", b"f", pseq, 8 + len(body), stod) + body


def _fopen(dictid: int, size: int, lfn: str) -> bytes:
    import struct

    name = lfn.encode() + b"\0" * (4 - len(lfn) % 4)
    return struct.pack(">bbhI", 1, 1, 20 + len(name), dictid) + struct.pack(">qI", size, 0) + name


def _fclose(dictid: int, read: int) -> bytes:
    import struct

    return struct.pack(">bbhI", 0, 0, 32, dictid) + struct.pack(">qqq", read, 0, 0)


def test_fstream_accesses_take_their_duration_where_the_packets_pin_it_down():
    from cachescope.config import load_config
    from ingest.xrootd_monitoring.assemble import Assembler

    stod, t = 1_795_700_000, 1_795_769_000
    lfn = "/store/data/Run2024A/Muon/AOD/v1/0000/{}.root"
    # a: open in 1000..1010 s, close in 1600..1610 s: 590..610 s, 600 s it is; b: open and close in
    # one packet (0..10 s: not known); c: 10..30 s (a window-sized guess: not known)
    packets = [(t, t + 10, [_fopen(1, 10**9, lfn.format("a")), _fopen(2, 10**8, lfn.format("b")), _fclose(2, 10**8),
                            _fopen(3, 10**8, lfn.format("c"))]),
               (t + 20, t + 30, [_fclose(3, 5 * 10**7)]),
               (t + 600, t + 610, [_fclose(1, 4 * 10**8)])]
    asm = Assembler(load_config(), name_of=lambda ip: ip)
    events = []
    for k, (tb, te, recs) in enumerate(packets):
        events += asm.feed(_fstream_datagram(k, stod, tb, te, *recs), "127.0.0.1")
    events += asm.finish()
    got = {e.path.rsplit("/", 1)[1]: e for e in events}
    assert sorted(got) == ["a.root", "b.root", "c.root"]
    assert got["a.root"].duration_us == 600_000_000 and got["a.root"].bytes_read == 4 * 10**8
    assert not got["b.root"].duration_us and not got["c.root"].duration_us
