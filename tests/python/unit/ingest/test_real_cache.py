"""The real cache's numbers as the real cache means them, on the xcache-lab captures (a real
XRootD 5.5.3 proxy file cache, ../shared/xcache-lab/captures) and on records built for each rule:
its verdict (`observed_hit`: nothing fetched from the origin), hit bytes within the bytes read,
records that stand for several accesses (access_cnt), the server ident skipped, raw binary
datagrams whose header holds a newline byte, and the truth reconstructed from the purge log."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from cachescope.config import load_config
from cachescope.config.pipeline import PipelineConfig
from cachescope.core.columns import EventColumns
from cachescope.core.observed import OBSERVED_FIELDS
from cachescope.core.processor import GroupProcessor
from support.data import parse_lines
from ingest.formats import xrootd_gstream as gs
from ingest.pipeline import LineParser, open_lines
from ingest.xcache_truth import CacheAccess, Purge, access_of_record, blocks_on_disk, on_disk, read_purges

CAPTURES = ("run1-default", "run2-prefetch0", "run3-prefetch0-asyncoff", "run4-asyncoff",
            "run5-json-insthdr-slow-origin")


def _capture(shared_dir: Path, name: str) -> Path:
    return shared_dir / "xcache-lab" / "captures" / name


def _records(shared_dir: Path, name: str) -> list[dict]:
    lines = (_capture(shared_dir, name) / "gstream.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if '"file_close"' in line]


def _raw_g(shared_dir: Path, name: str, out: Path) -> Path:
    """Each g-stream datagram of the capture as it came, binary header included, one per line
    (trailing NUL dropped): what a plain UDP-to-file relay keeps (the lab's `decode.py --raw-g`)."""
    data = gzip.decompress((_capture(shared_dir, name) / "udp.bin.gz").read_bytes())
    magic = b"XCLUDP1\n"
    assert data.startswith(magic)
    rec = struct.Struct("<dHI")
    at, lines = len(magic), []
    while at + rec.size <= len(data):
        _, _, n = rec.unpack_from(data, at)
        d = data[at + rec.size:at + rec.size + n]
        at += rec.size + n
        if d[:1] in (b"g", b"{"):
            lines.append(d.rstrip(b"\0") + b"\n")
    out.write_bytes(b"".join(lines))
    return out


def _parse_file(path: Path, columns: bool = False):
    rejects: list = []
    p = LineParser(gs.FORMAT, config=load_config(), on_reject=rejects.append, origin="file:h:/x")
    if columns:
        cols = EventColumns.concat(list(p.column_batches(open_lines(path))))
    else:
        p.enrich.resolve_path = p.enrich._resolve_in_python
        cols = EventColumns.concat([EventColumns.from_events(b) for b in p.batches(open_lines(path))])
    return cols, rejects


# --- raw datagrams and the server ident -------------------------------------------------------

@pytest.mark.parametrize("columns", [False, True])
def test_every_record_of_raw_binary_datagrams_parses(shared_dir, tmp_path, columns):
    """run1: 10 of 95 binary headers hold a newline byte (plen's high byte): the relay splits
    them over two lines, and the record after the header was lost (984/994 before)."""
    raw = _raw_g(shared_dir, "run1-default", tmp_path / "raw-g")
    assert sum(line[:1] == b"g" and len(line) < 24 for line in raw.read_bytes().split(b"\n")) == 10
    cols, rejects = _parse_file(raw, columns)
    assert len(cols) == 994
    assert all(r.skipped for r in rejects)  # header pieces: skipped, none rejected
    records = _records(shared_dir, "run1-default")
    assert cols.bytes_read.sum() == sum(min(r["size"], r["b_hit"] + r["b_miss"] + r["b_bypass"]) for r in records)
    assert sorted(cols.path.tolist()) == sorted(r["lfn"] for r in records)


@pytest.mark.parametrize("columns", [False, True])
def test_json_insthdr_datagrams_and_the_server_ident(shared_dir, tmp_path, columns):
    raw = _raw_g(shared_dir, "run5-json-insthdr-slow-origin", tmp_path / "raw-g")
    cols, rejects = _parse_file(raw, columns)
    assert len(cols) == 114
    assert set(cols.server.tolist()) == {"vm"}
    assert not [r for r in rejects if not r.skipped]
    assert [r.reason for r in rejects if "ident" in r.reason] == ["XRootD server ident (server vm)"]


def test_the_ident_sets_the_server_of_the_records_after_it(parse):
    ident = '{"code":"=","pseq":2,"stod":1,"sid":7,"src":{"site":"LAB","host":"cache1","port":1,"pgm":"xrootd"}}'
    close = '{"event":"file_close","lfn":"/store/a","size":10,"b_hit":10,"b_miss":0,"attach_t":1795769566,"remotes":[]}'
    events, rejects, _ = parse("xrootd-gstream", [ident, close])
    assert [(e.server, e.site) for e in events] == [("cache1", "LAB")]
    assert [(r.reason, r.skipped) for r in rejects] == [("XRootD server ident (server cache1)", True)]


def test_a_header_split_by_a_newline_byte_keeps_its_record(parse):
    header = struct.pack(">cBHiiiq", b"g", 1, 0x0A00 | 40, 1, 2, 3, (ord("C") << 56) | 5).decode("latin-1")
    assert "\n" in header
    record = '{"event":"file_close","lfn":"/store/a","size":10,"b_hit":10,"b_miss":0,"attach_t":1795769566}'
    head, tail = header.split("\n", 1)
    events, rejects, _ = parse("xrootd-gstream", [head, tail + record])
    assert [e.path for e in events] == ["/store/a"]
    assert [r.skipped for r in rejects] == [True]
    # a whole header (no newline byte), and one holding a brace before the JSON
    braced = "g" + "\x01{\x02" + "x" * 20 + record
    events, rejects, _ = parse("xrootd-gstream", [header.replace("\n", "\x0b") + record, braced])
    assert [e.path for e in events] == ["/store/a", "/store/a"] and not rejects


# --- the verdict and the hit bytes -------------------------------------------------------------

def _close(**kw) -> str:
    rec = {"event": "file_close", "lfn": "/store/mc/a.root", "size": 100, "b_hit": 100, "b_miss": 0, "b_bypass": 0,
           "attach_t": 1795769566, "detach_t": 1795769567}
    rec.update(kw)
    return json.dumps({k: v for k, v in rec.items() if v is not ...})


def test_the_verdict_is_whether_anything_was_fetched_from_the_origin(parse):
    lines = [_close(remotes=[]), _close(remotes=["o:1094"]), _close(),
             _close(remotes=[], b_todisk=0, b_prefetch=0), _close(remotes=[], b_todisk=5, b_prefetch=0),
             _close(b_todisk=0, b_prefetch=7), _close(remotes=[], b_miss=3), _close(remotes="o:1094")]
    events, rejects, _ = parse("xrootd-gstream", lines)
    assert not rejects
    assert [e.observed_hit for e in events] == [1, 0, None, 1, 0, 0, 0, None]


def test_lab_verdicts_are_the_records_remotes(shared_dir):
    records = _records(shared_dir, "run1-default")
    events, rejects, _ = parse_lines("xrootd-gstream", [json.dumps(r) for r in records])
    assert len(events) == 994 and not rejects
    assert [e.observed_hit for e in events] == [int(not r["remotes"]) for r in records]
    assert sum(e.observed_hit for e in events) == 665
    # the older byte rule calls 973 of them hits
    assert sum(e.observed_hit_bytes > 0 and e.observed_miss_bytes == 0 and e.observed_bypass_bytes == 0
               for e in events) == 973


def test_hit_bytes_never_exceed_the_bytes_read(shared_dir, parse):
    events, _, parser = parse("xrootd-gstream", [_close(b_hit=250, b_miss=30, b_bypass=5, remotes=["o"])])
    e = events[0]
    assert (e.bytes_read, e.observed_miss_bytes, e.observed_bypass_bytes, e.observed_hit_bytes) == (100, 30, 5, 65)
    assert parser.enrich.clamped == 1
    events, _, _ = parse("xrootd-gstream", [_close(b_hit=20, b_miss=30, remotes=["o"])])
    assert (events[0].bytes_read, events[0].observed_hit_bytes, events[0].observed_miss_bytes) == (50, 20, 30)
    records = _records(shared_dir, "run1-default")
    events, _, _ = parse_lines("xrootd-gstream", [json.dumps(r) for r in records])
    over = [e for e, r in zip(events, records) if r["b_hit"] > r["size"]]
    assert over, "run1 has re-reads inside one attach"
    assert all(e.observed_hit_bytes + e.observed_miss_bytes + e.observed_bypass_bytes <= e.bytes_read for e in events)


# --- records that stand for several accesses ------------------------------------------------------

def test_access_cnt_growth_makes_a_record_several_accesses(parse):
    lines = [_close(access_cnt=1, remotes=["o"], b_hit=0, b_miss=100),
             _close(access_cnt=4, remotes=[], b_hit=250),          # 3 accesses: 2 had no record
             _close(access_cnt=1, remotes=["o"], b_hit=0, b_miss=100),  # purged and fetched again
             _close(access_cnt=2, b_hit=0, b_miss=0),              # served 0 bytes: skipped, still counted
             _close(access_cnt=3, remotes=[]),
             _close(access_cnt=3 + gs.MAX_SPLIT + 1, remotes=[]),  # an implausible jump: one access
             _close(lfn="/store/mc/b.root", access_cnt=9, remotes=[])]  # first seen mid-stream: one access
    events, rejects, _ = parse("xrootd-gstream", lines)
    assert [(e.observed_hit, e.bytes_read, e.observed_hit_bytes) for e in events] == [
        (0, 100, 0), (1, 84, 84), (1, 83, 83), (1, 83, 83), (0, 100, 0), (1, 100, 100), (1, 100, 100), (1, 100, 100)]
    assert [e.seq for e in events] == list(range(8))
    assert len({e.ts for e in events[1:4]}) == 1
    assert sum(e.observed_hit_bytes for e in events[1:4]) == 250  # split exactly (each within the file size)
    assert [r.reason for r in rejects] == ["cache access that served 0 bytes"]


def test_access_cnt_is_kept_per_server(parse):
    a = _close(access_cnt=1, host="c1", remotes=["o"])
    b = _close(access_cnt=2, host="c2", remotes=[])
    c = _close(access_cnt=3, host="c1", remotes=[])
    events, _, _ = parse("xrootd-gstream", [a, b, c])
    assert [e.server for e in events] == ["c1", "c2", "c1", "c1"]


def test_lab_records_are_one_attach_each(shared_dir):
    """Measured: access_cnt never grows by more than 1 between records of a file (it restarts
    at 1 after a purge), so every lab record is one access; the opens merged into one attach
    (1000 client reads, 994 records in run1) do not show in it."""
    for name in CAPTURES:
        records = _records(shared_dir, name)
        last: dict[str, int] = {}
        restarts = 0
        for r in records:
            before = last.get(r["lfn"])
            assert before is None or r["access_cnt"] <= before + 1, (name, r["lfn"])
            restarts += before is not None and r["access_cnt"] <= before
            last[r["lfn"]] = r["access_cnt"]
        events, _, _ = parse_lines("xrootd-gstream", [json.dumps(r) for r in records])
        assert len(events) == len(records)
        if name == "run1-default":
            assert restarts == 119


# --- the processing core counts real hits by the verdict ---------------------------------------

def test_real_hits_come_from_the_verdict_and_the_byte_rule_only_without_one():
    n = 4
    cols = EventColumns(
        ts=np.full(n, 1_700_000_000_000_000, dtype=np.int64), site=np.full(n, "S", dtype=object),
        source=np.full(n, "xrootd-gstream", dtype=object), server=np.full(n, "c1", dtype=object),
        client=np.full(n, "", dtype=object), vo=np.full(n, "cms", dtype=object),
        path=np.array([f"/store/f{i}" for i in range(n)], dtype=object), file_id=np.arange(n, dtype=np.uint64),
        file_size=np.full(n, 100, dtype=np.uint64), bytes_read=np.full(n, 100, dtype=np.uint64),
        op=np.zeros(n, dtype=np.uint8), tier=np.full(n, "AOD", dtype=object), cache_group=np.full(n, "g", dtype=object),
        observed_hit_bytes=np.array([100, 100, 100, 50], dtype=np.int64),
        observed_miss_bytes=np.array([0, 0, 0, 50], dtype=np.int64),
        observed_bypass_bytes=np.zeros(n, dtype=np.int64),
        observed_hit=np.array([0, 1, -1, -1], dtype=np.int8),  # b_miss 0 but fetched; verdict hit; no verdict x2
        observed_origin_bytes=np.full(n, -1, dtype=np.int64),
        origin=np.full(n, "file:h:/x", dtype=object), seq=np.arange(n, dtype=np.uint64))
    proc = GroupProcessor("g", PipelineConfig())
    out = proc.process(cols)
    rows = out.observed if out.observed is not None else proc.flush().observed
    assert int(rows["accesses"].sum()) == 4
    assert int(rows["hits"].sum()) == 2  # the verdict's one, and the byte rule's one where there is none
    assert OBSERVED_FIELDS[5] == "hits"


# --- the truth from the purge log --------------------------------------------------------------

def test_truth_follows_purges_and_blocks():
    accesses = [CacheAccess("/a", 10, 2, 4), CacheAccess("/a", 20, 2, 4),   # partial, then the same blocks
                CacheAccess("/a", 30, 4, 4), CacheAccess("/a", 40, 4, 4),   # the rest fetched, then complete
                CacheAccess("/a", 60, 4, 4),                                # removed by the purge at 50
                CacheAccess("/b", 60), CacheAccess("/b", 70), CacheAccess("/c", 5)]
    purges = [Purge(50, ("/a",)), Purge(60, ("/b",))]
    assert on_disk(accesses, purges, initial=["/c"]) == [False, True, False, True, False, False, True, True]
    # the blocks each found on disk (the transfer efficiency's truth): None where no count says
    assert blocks_on_disk(accesses, purges, initial=["/c"]) == [0, 2, 2, 4, 0, 0, None, None]


def test_on_the_lab_the_verdict_is_the_truth_and_the_byte_rule_is_not(shared_dir):
    figures = {}
    for name in CAPTURES:
        records = _records(shared_dir, name)
        purges = read_purges((_capture(shared_dir, name) / "purges.jsonl").read_text().splitlines())
        truth = on_disk([access_of_record(r) for r in records], purges)
        events, _, _ = parse_lines("xrootd-gstream", [json.dumps(r) for r in records])
        verdict = [e.observed_hit == 1 for e in events]
        old = [e.observed_hit_bytes > 0 and e.observed_miss_bytes == 0 and e.observed_bypass_bytes == 0
               for e in events]
        assert verdict == truth, name
        figures[name] = (sum(old), sum(verdict), len(records))
    assert figures["run1-default"] == (973, 665, 994)  # prefetch: the byte rule says 0.98, the cache held 0.67
    assert figures["run2-prefetch0"][0] == figures["run2-prefetch0"][1]
