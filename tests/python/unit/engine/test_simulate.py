"""`cachescope simulate` against libCacheSim's reference results and its command-line contract."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cachescope.simulation import CacheSpec, LruCurve, load_trace, simulate
from cachescope.units import SizeError, parse_size

CLI = [str(Path(sys.executable).parent / "cachescope")]


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), input=stdin, capture_output=True)


@pytest.fixture(scope="module")
def reference(shared_dir):
    rows = [json.loads(l) for l in (shared_dir / "reference/shared_seed1_libcachesim.jsonl").read_text().splitlines()]
    return shared_dir / "reference/shared_seed1.csv.zst", rows


def test_lru_and_fifo_match_libcachesim_exactly(reference):
    trace, rows = reference
    rows = [r for r in rows if r["policy"] in ("lru", "fifo")]
    sizes = sorted({r["size_bytes"] for r in rows})
    out = cli("simulate", str(trace), "--policy", "lru,fifo", "--size", ",".join(map(str, sizes)), "--json")
    assert out.returncode == 0, out.stderr.decode()
    got = {(r["policy"], r["size_bytes"]): r for r in map(json.loads, out.stdout.splitlines())}
    for r in rows:
        mine = got[(r["policy"], r["size_bytes"])]
        assert mine["requests"] == r["requests"]
        assert mine["hits"] == r["requests"] - r["n_miss"], (r["policy"], r["size_bytes"])
        assert mine["bytes_requested"] == r["n_req_bytes"]
        assert mine["bytes_hit"] == r["n_req_bytes"] - r["n_miss_bytes"]
        for key in ("policy", "size_bytes", "requests", "hits", "hit_ratio", "bytes_requested", "bytes_hit", "byte_hit_ratio"):
            assert key in mine


def test_exact_curve_equals_separate_simulations(reference):
    trace = load_trace(reference[0])
    sub = trace.__class__(trace.timestamp[:200_000], trace.file_id[:200_000], trace.file_size[:200_000],
                          trace.bytes_read[:200_000], trace.tier[:200_000], trace.tier_names)
    grid = [10**9, 5 * 10**12, 2 * 10**13, 8 * 10**13]
    curve = LruCurve(grid, len(sub.tier_names))
    curve.feed(sub.file_id, sub.file_size, sub.bytes_read, sub.tier, np.zeros(len(sub), np.uint8))
    totals = simulate(sub, [CacheSpec("lru", g) for g in grid])
    for point, per_tier in zip(curve.points(), totals):
        assert point["hits"] == per_tier[:, 1].sum()
        assert point["bytes_hit"] == per_tier[:, 3].sum()


def test_partial_reads_and_tiers(tmp_path):
    t = tmp_path / "t.csv"
    # A (100 B) read whole, then 40 B of it (a hit for 40 B); B too large for the cache
    t.write_text("timestamp,obj_id,obj_size,tier,path,bytes_read\n"
                 "1,1,100,AOD,/a,100\n2,1,100,AOD,/a,40\n3,2,500,HITS,/b,500\n4,2,500,HITS,/b,10\n")
    out = cli("simulate", str(t), "--policy", "lru", "--size", "200", "--json")
    r = json.loads(out.stdout)
    assert (r["requests"], r["hits"], r["bytes_requested"], r["bytes_hit"]) == (4, 1, 650, 40)
    assert r["by_tier"]["AOD"]["hit_ratio"] == 0.5
    assert r["by_tier"]["HITS"]["hits"] == 0


def test_malformed_row_names_the_line(tmp_path):
    t = tmp_path / "bad.csv"
    t.write_text("timestamp,obj_id,obj_size\n1,1,100\n2,two,100\n")
    out = cli("simulate", str(t), "--size", "1TB", "--json")
    assert out.returncode == 1  # bad data (2 is for bad usage)
    assert "line 3: obj_id \"two\"" in out.stderr.decode()
    assert out.stdout == b""


def test_unknown_policy_and_bad_size_are_clear_errors(tmp_path):
    t = tmp_path / "t.csv"
    t.write_text("timestamp,obj_id,obj_size\n1,1,100\n")
    out = cli("simulate", str(t), "--policy", "lru,nope", "--size", "1TB")
    assert out.returncode == 2 and b"unknown policy nope" in out.stderr
    out = cli("simulate", str(t), "--size", "10XB")
    assert out.returncode == 2 and b"unknown unit" in out.stderr


def test_stdin_and_zstd(tmp_path):
    import zstandard

    data = b"timestamp,obj_id,obj_size\n1,1,100\n2,1,100\n"
    z = tmp_path / "t.csv.zst"
    z.write_bytes(zstandard.ZstdCompressor().compress(data))
    for args, stdin in (([str(z)], None), (["-"], data)):
        r = json.loads(cli("simulate", *args, "--size", "1KB", "--json", stdin=stdin).stdout)
        assert (r["hits"], r["size_bytes"]) == (1, 1000)


def test_byte_sums_of_huge_files_are_exact(tmp_path):
    # four files near 2^63 bytes: the byte sums pass 2^64 (a u64 counter wrapped to nonsense)
    big = 2**63
    sizes = {1: big - 1, 2: big - 4096, 3: 3 * 2**61, 4: 2**64 - 1}
    order = [1, 1, 2, 2, 1, 3, 4, 3, 1, 4]
    t = tmp_path / "huge.csv"
    t.write_text("timestamp,obj_id,obj_size\n" + "".join(f"{i},{f},{sizes[f]}\n" for i, f in enumerate(order)))
    out = cli("simulate", str(t), "--policy", "lru,fifo,arc,s3fifo", "--size", str(big - 1), "--json")
    assert out.returncode == 0, out.stderr.decode()
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    requested = sum(sizes[f] for f in order)
    assert requested > 2**65
    for r in rows:
        assert r["bytes_requested"] == requested
        assert 0 <= r["byte_hit_ratio"] <= 1 and r["bytes_hit"] <= requested
    lru = rows[0]
    # LRU at 2^63−1: 1 m, 1 H, 2 m (evicts 1), 2 H, 1 m, 3 m, 4 too big, 3 H, 1 m, 4 too big
    assert (lru["hits"], lru["bytes_hit"]) == (3, (big - 1) + (big - 4096) + 3 * 2**61)
    assert lru["byte_hit_ratio"] == lru["bytes_hit"] / requested
    # the same exact figures through the in-memory path (a % size needs the working set)
    whole = cli("simulate", str(t), "--policy", "lru", "--size", "100%", "--json")
    assert whole.returncode == 2 and b"2^63-1" in whole.stderr  # 100% of 2^65 bytes is no cache
    out = cli("simulate", str(t), "--policy", "lru,belady", "--size", str(big - 1), "--json")
    rows2 = [json.loads(line) for line in out.stdout.splitlines()]
    assert rows2[0] == lru and rows2[1]["bytes_requested"] == requested


@pytest.mark.parametrize("codec", ["zst", "gz"])
def test_truncated_or_damaged_compressed_trace_fails_with_the_file_and_offset(tmp_path, codec):
    import gzip

    import zstandard

    data = b"timestamp,obj_id,obj_size\n" + b"".join(b"%d,%d,%d\n" % (i, i % 5000, 1000 + i % 7) for i in range(300_000))
    packed = zstandard.ZstdCompressor().compress(data) if codec == "zst" else gzip.compress(data)
    whole = tmp_path / f"t.csv.{codec}"
    whole.write_bytes(packed)
    ok = cli("simulate", str(whole), "--policy", "lru", "--size", "1MB", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["requests"] == 300_000
    cut = tmp_path / f"cut.csv.{codec}"
    cut.write_bytes(packed[: len(packed) // 2])
    for args in (["--size", "1MB"], ["--size", "5%"], ["--size", "1MB", "--mrc"]):
        out = cli("simulate", str(cut), "--policy", "lru", *args, "--json")
        err = out.stderr.decode()
        assert out.returncode == 1, err
        assert out.stdout == b""  # nothing partial printed as if complete
        assert len(err.strip().splitlines()) == 1, err
        assert str(cut) in err and f"at byte {len(packed) // 2} of the file" in err, err
        assert "Traceback" not in err


def test_oracle_general_input_gives_the_csv_figures(tmp_path):
    import zstandard

    rng = np.random.default_rng(3)
    ids = rng.zipf(1.3, 50_000).astype(np.uint64) % np.uint64(3000)
    sizes = (ids * np.uint64(7919) % np.uint64(10_000) + np.uint64(1)).astype(np.uint64)
    csv = tmp_path / "t.csv"
    csv.write_text("timestamp,obj_id,obj_size\n" + "".join(f"{i},{a},{b}\n" for i, (a, b) in enumerate(zip(ids, sizes))))
    rec = np.zeros(len(ids), dtype=[("ts", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rec["ts"], rec["id"], rec["size"], rec["next"] = np.arange(len(ids)), ids, sizes, -1
    og = tmp_path / "t.oracleGeneral.zst"
    og.write_bytes(zstandard.ZstdCompressor().compress(rec.tobytes()))
    args = ["--policy", "lru,arc,s3fifo", "--size", "1MB,5MB", "--json"]
    a = cli("simulate", str(csv), *args)
    b = cli("simulate", str(og), "--format", "oracle-general", *args)
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    assert a.stdout == b.stdout
    (tmp_path / "short.oracleGeneral").write_bytes(rec.tobytes()[:-5])
    c = cli("simulate", str(tmp_path / "short.oracleGeneral"), "--format", "oracle-general", *args)
    assert c.returncode == 1 and b"truncated oracleGeneral record 50000" in c.stderr and c.stdout == b""


@pytest.mark.parametrize("text,expected", [
    ("10TB", 10 * 10**12), ("10TiB", 10 * 2**40), ("123", 123), ("1.5TB", 1_500_000_000_000),
    ("7 GiB", 7 * 2**30), ("18446744073709551615", 2**64 - 1),
])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "TB", "-1TB", "0", "10XB", "18446744073709551616", "1e3", "1.5", "0.1KiB", True, 1.5])
def test_bad_sizes(text):
    with pytest.raises(SizeError):
        parse_size(text)


def test_sampling_and_partition_errors_on_the_shared_trace(reference):
    from cachescope.bench.accuracy import curve_errors, variant_errors

    trace = load_trace(reference[0])
    ws = trace.working_set()
    caps = [ws // 100, ws // 10, ws * 3 // 10]
    rows = {r["variant"]: r for r in variant_errors(trace, ["lru"], caps, [("r0.1", 0.1, 1), ("p48", 1.0, 48)])}
    # the Tokyo study found < 1% between 48 small caches and one big one; SHARDS at 10% is as close
    assert rows["p48"]["max_abs_error"] < 0.01
    assert rows["r0.1"]["max_abs_error"] < 0.01
    curve = curve_errors(trace, [ws // 100, ws // 10, ws // 3], [("fixed", 0.1, 8192)])
    assert curve[0]["max_abs_error"] < 0.02


def test_a_streamed_simulate_loads_neither_numpy_nor_pydantic(tmp_path):
    # their imports were most of the start-up of a short run (a sweep runs thousands)
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,obj_id,obj_size\n1,1,100\n2,2,100\n3,1,100\n")
    code = ("import sys\nfrom cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', sorted(m for m in ('numpy', 'pydantic', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, "simulate", str(trace), "--policy", "lru,arc", "--size", "100%",
                          "--json"], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[4])
    assert out.returncode == 0, out.stderr
    rows, loaded = out.stdout.splitlines()[:-1], out.stdout.splitlines()[-1]
    assert [json.loads(r)["hits"] for r in rows] == [1, 1]
    assert loaded == "LOADED []"
    # the whole-trace path (the curve needs the trace in memory) does load numpy
    out = subprocess.run([sys.executable, "-c", code, "simulate", str(trace), "--size", "50%", "--mrc", "--json"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[4])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "LOADED ['numpy']"


def test_progress_streams_the_file_and_keeps_stdout_to_the_results(reference):
    # a progress bar (on by default at a terminal) no longer loads the whole trace first: the
    # engine streams the file and reports the share done; the bar goes to stderr
    trace, _ = reference
    args = ["simulate", str(trace), "--policy", "lru,arc,s3fifo", "--size", "1GB,20GB", "--json"]
    plain, shown = cli(*args), cli(*args, "--progress")
    assert plain.returncode == shown.returncode == 0, shown.stderr.decode()
    assert shown.stdout == plain.stdout and shown.stderr == b""  # no bar drawn off a terminal
    assert [json.loads(line)["policy"] for line in shown.stdout.splitlines()] == ["lru"] * 2 + ["arc"] * 2 + ["s3fifo"] * 2


def test_simulate_file_reports_its_progress_up_to_one(reference):
    from cachescope.specs import simulate_file

    trace, _ = reference
    specs = [CacheSpec(p, 5 * 10**9) for p in ("lru", "arc", "s3fifo")]
    seen: list[float] = []
    totals, tiers, n = simulate_file(trace, specs, on_progress=seen.append)
    assert (totals, tiers, n) == simulate_file(trace, specs)
    assert seen and seen[-1] == 1.0 and all(0.0 <= f <= 1.0 for f in seen)


def test_a_share_of_the_working_set_streams_the_file_twice(reference):
    # a `5%` size needs the working set: a first streamed pass in the engine finds it (the same
    # figure as the trace loaded whole), then the caches stream the file as for byte sizes
    from cachescope.specs import working_set

    trace, _ = reference
    whole = load_trace(trace)
    wss, rows = working_set(trace)
    assert (wss, rows) == (whole.working_set(), len(whole))
    by_share = cli("simulate", str(trace), "--policy", "lru,s3fifo", "--size", "5%,20%", "--json")
    assert by_share.returncode == 0, by_share.stderr.decode()
    sizes = [max(1, int(wss * p / 100)) for p in (5, 20)]
    by_bytes = cli("simulate", str(trace), "--policy", "lru,s3fifo", "--size", ",".join(map(str, sizes)), "--json")
    strip = lambda out: [{k: v for k, v in json.loads(l).items() if k != "size"} for l in out.stdout.splitlines()]
    assert strip(by_share) == strip(by_bytes)
    assert [json.loads(l)["size_bytes"] for l in by_share.stdout.splitlines()] == sizes * 2
    # standard input cannot be read twice: loaded whole, the same figures
    piped = cli("simulate", "-", "--policy", "lru,s3fifo", "--size", "5%,20%", "--json", stdin=trace.read_bytes())
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout == by_share.stdout


@pytest.mark.parametrize("sizes", ["1MB,2MB", "5%"])
def test_ctrl_c_stops_a_streamed_simulate_waiting_on_its_input(sizes):
    # the engine runs in a thread of its own and Ctrl-C cancels it, even while its reader waits
    # on a pipe that never ends: one line and exit 130, not a wait for the end of the input
    import os
    import signal
    import time

    import fcntl
    import termios

    r, w = os.pipe()
    # SIGINT's default in the child: a suite run as a background job ignores SIGINT, and an ignored
    # disposition is inherited (Python then installs no handler of its own)
    proc = subprocess.Popen(CLI + ["simulate", "-", "--policy", "lru,arc", "--size", sizes, "--json"], stdin=r,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(r)
    try:
        os.write(w, b"timestamp,obj_id,obj_size\n1,1,5\n2,2,5\n")
        # started and waiting for more input: the engine's reader has taken what was written
        # (bytes still in the pipe, FIONREAD), however long the start took on a loaded machine
        pending = bytearray(4)
        while True:
            fcntl.ioctl(w, termios.FIONREAD, pending)
            if int.from_bytes(pending, "little") == 0 or proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=600)  # a hang guard: without the cancel it never ends
    finally:
        os.close(w)
        proc.kill()
    assert proc.returncode == 130, err.decode()
    assert err.decode() == "cachescope simulate: interrupted\n" and out == b""
