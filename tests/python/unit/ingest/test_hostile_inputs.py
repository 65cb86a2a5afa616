"""`parse` and `replay` against hostile inputs (issue 28): a line over the 16 MiB bound is refused
with the file, the line and its byte offset; a gzip bomb and a file of random bytes stay in
bounded memory (peak RSS of the command, with its parse processes, from wait4 in a small launcher); a rejected line is
kept as a prefix; an input of which every line is rejected exits 1."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zlib
from collections import Counter
from pathlib import Path

import orjson
import pytest

from cachescope.compressed import MAX_LINE_BYTES
from ingest.generate import make_workload, write
from ingest.pipeline import REJECT_TEXT_CHARS, reason_key

CLI = str(Path(sys.executable).parent / "cachescope")
MiB = 1 << 20


#: runs the command from a small process and writes its peak RSS (KiB) to argv[1]: a child forked
#: from pytest itself would count pytest's own memory (the pre-exec image) in its ru_maxrss
_LAUNCH = ("import os, subprocess, sys\n"
           "p = subprocess.Popen(sys.argv[2:])\n"
           "_, status, usage = os.wait4(p.pid, 0)\n"
           "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
           "sys.exit(os.waitstatus_to_exitcode(status))\n")


def run(*args: str) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, peak RSS in MiB of the command and its waited-for children)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        code = subprocess.run([sys.executable, "-c", _LAUNCH, peak.name, CLI, *args], stdout=out, stderr=err).returncode
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(), err.read().decode(), int(peak.read()) / 1024


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> list[str]:
    d = tmp_path_factory.mktemp("records")
    path = write("xrootd-collector", make_workload(200, days=1, sites=1, servers=1, seed=3), d / "c.jsonl",
                 single_file=True)[0]
    return Path(path).read_text().splitlines()


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """256 MiB of zeros in a few hundred kB of gzip: one line 16 times the bound."""
    path = tmp_path_factory.mktemp("bomb") / "zeros.jsonl.gz"
    c = zlib.compressobj(9, wbits=31)
    zeros = bytes(MiB)
    with open(path, "wb") as f:
        for _ in range(256):
            f.write(c.compress(zeros))
        f.write(c.flush())
    assert path.stat().st_size < MiB
    return path


def test_parse_refuses_a_line_over_the_bound_naming_file_line_and_offset(tmp_path, records):
    head = "\n".join(records[:5]) + "\n"
    path = tmp_path / "long.jsonl"
    with open(path, "w") as f:
        f.write(head)
        f.write("x" * (MAX_LINE_BYTES + 10) + "\n")
        f.write("\n".join(records[5:]) + "\n")
    code, out, err, _ = run("parse", "-f", "xrootd-collector", str(path))
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(path) in err and "line 6" in err and f"byte {len(head.encode()):,}" in err and "16 MiB" in err
    assert len(out.splitlines()) == 5  # the events before it were written


def test_a_line_at_the_bound_is_a_reject_kept_as_a_prefix(tmp_path, records):
    path = tmp_path / "big.jsonl"
    long_line = "y" * (MAX_LINE_BYTES - 1)
    path.write_text(records[0] + "\n" + long_line + "\n" + records[1] + "\n")
    code, out, err, _ = run("parse", "-f", "xrootd-collector", "--rejects", str(tmp_path / "r.jsonl"), str(path))
    assert code == 0, err
    assert len(out.splitlines()) == 2
    (rec,) = [orjson.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert rec["line"] == 2
    assert rec["text"].startswith("y" * REJECT_TEXT_CHARS) and len(rec["text"]) < REJECT_TEXT_CHARS + 100
    assert f"{len(long_line) - REJECT_TEXT_CHARS:,} more characters" in rec["text"]


def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path, bomb):
    code, out, err, parse_rss = run("parse", "-f", "xrootd-collector", str(bomb))
    assert code == 1 and out == ""
    assert str(bomb) in err and "line 1 " in err and "decompressed data" in err and "16 MiB" in err
    # before the bound the whole 256 MiB line was held (as bytes and as text): over 600 MiB
    assert parse_rss < 250, parse_rss

    baseline = run("replay", "-f", "xrootd-collector", "--store", str(tmp_path / "s0"), str(_tiny(tmp_path)))
    assert baseline[0] == 0, baseline[2]
    code, _, err, replay_rss = run("replay", "-f", "xrootd-collector", "--store", str(tmp_path / "s1"), str(bomb))
    assert code == 1 and "16 MiB" in err and str(bomb) in err and "Traceback" not in err
    assert replay_rss < baseline[3] + 150, (replay_rss, baseline[3])


def _tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    write("xrootd-collector", make_workload(200, days=1, sites=1, servers=1, seed=5), path, single_file=True)
    return path


def test_replay_of_random_bytes_streams_its_rejects_in_bounded_memory(tmp_path):
    """A file of garbage big enough for a parse process: before, the process kept every reject
    until a batch of events came (none does), then sent them all at once (807 MiB for 64 MiB)."""
    import random

    path = tmp_path / "garbage.bin"
    rng = random.Random(7)
    with open(path, "wb") as f:
        for _ in range(24):
            f.write(rng.randbytes(MiB))
    text = path.read_bytes().decode("utf-8", "replace").split("\n")
    usable = sum(1 for line in text if line.rstrip("\r\n") and not line.isspace())  # the parser's blank lines
    baseline = run("replay", "-f", "xrootd-collector", "--store", str(tmp_path / "s0"), str(_tiny(tmp_path)))
    store = tmp_path / "store"
    code, _, err, rss = run("replay", "-f", "xrootd-collector", "--store", str(store), str(path))
    assert code == 1 and "nothing usable was read" in err and "Traceback" not in err
    rejects = (store / "rejects.jsonl").read_bytes().splitlines()
    assert f"{usable:,} rejected" in err  # every line counted
    # the first 1,000 per reason written (ingest.rejects_per_reason), the rest counted in the summary
    written = Counter(reason_key(orjson.loads(r)["reason"]) for r in rejects)
    assert max(written.values()) == 1000, written
    not_written = re.search(r"([\d,]+) rejects not written \(only the first 1,000 per reason", err)
    assert not_written and len(rejects) + int(not_written.group(1).replace(",", "")) == usable, err
    assert {orjson.loads(r)["file"] for r in rejects[:: len(rejects) // 50]} == {str(path)}
    # before: every reject held by the parse process, then sent at once (+300 MiB for 24 MiB)
    assert rss < baseline[3] + 120, (rss, baseline[3])


def test_an_input_with_no_usable_line_exits_1_for_parse_and_replay(tmp_path, records):
    junk = tmp_path / "junk.txt"
    junk.write_text("not a record\n{]\n\na=b&c\n")
    code, out, err, _ = run("parse", "-f", "rucio-trace", str(junk))
    assert code == 1 and out == ""
    last = err.strip().splitlines()[-1]
    assert "none of the 3 lines" in last and str(junk) in last and "--format" in last
    assert len(err.strip().splitlines()) == 4  # the three rejects, then the one error line

    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(records) + "\n")
    code, _, err, _ = run("replay", "-f", "xrootd-collector", "--store", str(tmp_path / "s"), str(good), str(junk))
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert "nothing usable was read" in last and str(junk) in last and "all 3 lines rejected" in last
    assert str(good) not in last
    # a file with usable lines among rejects is a success; an empty one is not "unusable"
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(records[0] + "\nnot a record\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for path in (mixed, empty):
        assert run("parse", "-f", "xrootd-collector", str(path))[0] == 0
    assert run("replay", "-f", "xrootd-collector", "--store", str(tmp_path / "s2"), str(mixed), str(empty))[0] == 0


def test_a_zstd_bomb_is_refused_in_bounded_memory(tmp_path):
    """1 GiB of zeros in 32 kB of zstd: zstd cannot cap a call's output, so it is fed in small
    slices (4 KiB of this expanded to 128 MiB at once: 209 MiB peak)."""
    import zstandard

    path = tmp_path / "zeros.jsonl.zst"
    c = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    zeros = bytes(64 * MiB)
    with open(path, "wb") as f:
        for _ in range(16):
            f.write(c.compress(zeros))
        f.write(c.flush())
    code, out, err, rss = run("parse", "-f", "xrootd-collector", str(path))
    assert code == 1 and out == "" and "16 MiB" in err and "decompressed data" in err
    assert rss < 160, rss


def _random_file(path: Path, mib: int, seed: int) -> Path:
    import random

    rng = random.Random(seed)
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(rng.randbytes(MiB))
    return path


def _lines(path: Path) -> int:
    text = path.read_bytes().decode("utf-8", "replace").split("\n")
    return sum(1 for line in text if line.rstrip("\r\n") and not line.isspace())


def test_random_bytes_as_gstream_are_rejects_written_bounded_per_reason(tmp_path, monkeypatch):
    """Random bytes with --format xrootd-gstream: before, a line starting with `g` was a "header"
    and the short lines after it skipped (exit 0, rejects as large as the input); now every line is
    a reject, the first N per reason written (ingest.rejects_per_reason), the rest counted, exit 1."""
    monkeypatch.setenv("CACHESCOPE_INGEST__REJECTS_PER_REASON", "50")
    path = _random_file(tmp_path / "random.bin", 8, seed=11)
    n = _lines(path)
    code, out, err, _ = run("parse", "-f", "xrootd-gstream", "--stats", str(path))
    assert code == 1 and out == "", err[-2000:]
    lines = err.strip().splitlines()
    assert "none of the" in lines[-1] and "is a xrootd-gstream record" in lines[-1]
    stats = orjson.loads(lines[-2])["stats"]
    summary = orjson.loads(lines[-3])
    recs = [orjson.loads(line) for line in lines[:-3]]
    assert stats["rejected"] == n and stats["skipped"] == 0 and stats["events"] == 0, stats
    assert summary["rejects_per_reason"] == 50 and stats["rejects_not_written"] == summary["rejects_not_written"]
    assert len(recs) + summary["rejects_not_written"] == n
    per_reason = Counter(reason_key(r["reason"]) for r in recs)
    assert max(per_reason.values()) == 50 and sum(summary["by_reason"].values()) == summary["rejects_not_written"]
    assert any(r["text"][:1] == "g" and r["reason"].startswith("not a g-stream record") for r in recs)
    store = tmp_path / "store"
    code, _, err, _ = run("replay", "-f", "xrootd-gstream", "--store", str(store), str(path))
    assert code == 1 and "nothing usable was read" in err and "Traceback" not in err
    assert f"{n:,} rejected, 0 skipped" in err and "rejects not written" in err
    assert len((store / "rejects.jsonl").read_bytes().splitlines()) == len(recs)


def _close(**fields) -> str:
    rec = {"event": "file_close", "lfn": "/atlas/rucio/mc23_13p6TeV/f1/52/AOD.20055714._000164.pool.root.1",
           "size": 1000, "attach_t": 1704067232, "detach_t": 1704067243, "remotes": [], "b_hit": 1000,
           "b_miss": 0, "b_bypass": 0}
    rec.update(fields)
    return orjson.dumps(rec).decode()


def test_big_numbers_are_rejects_with_their_reason_in_parse_and_replay(tmp_path):
    """A size the store's counters cannot hold (above 2^48 bytes per access: cachescope.units) is a
    reject naming it: before, size = b_miss = 2^63 made `replay` end with `internal error:
    OverflowError`, and three accesses of 2^63-1 bytes in one minute `internal error: ValueError: …
    a counter exceeds 2^64-1 within one window`."""
    top = 2**63 - 1
    lines = [_close(), _close(size=2**63, b_miss=2**63, b_hit=0, attach_t=1704067233),
             *(_close(size=top, b_hit=top, attach_t=1704067240 + i, lfn=f"/atlas/rucio/x/AOD.{i}.root")
               for i in range(3)),
             _close(size=2**48, b_hit=2**48, attach_t=1704067250, lfn="/atlas/rucio/x/AOD.max.root")]
    log = tmp_path / "g.jsonl"
    log.write_text("\n".join(lines) + "\n")
    code, out, err, _ = run("parse", "-f", "xrootd-gstream", str(log))
    assert code == 0, err
    assert [orjson.loads(e)["file_size"] for e in out.splitlines()] == [1000, 2**48]
    rejects = [orjson.loads(line) for line in err.splitlines()]
    assert [r["line"] for r in rejects] == [2, 3, 4, 5]
    assert all(r["reason"].startswith("file size: ") and "above the 281,474,976,710,656 bytes" in r["reason"]
               for r in rejects), rejects
    store = tmp_path / "store"
    code, _, err, _ = run("replay", "-f", "xrootd-gstream", "--store", str(store), str(log))
    assert code == 0 and "internal error" not in err and "Traceback" not in err, err
    assert "2 events (4 rejected" in err, err
    assert len((store / "rejects.jsonl").read_bytes().splitlines()) == 4
