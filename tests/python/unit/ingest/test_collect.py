"""`cachescope collect` against the lab's captures of a real XRootD 5.5.3 cache (../shared/xcache-lab):
each capture's datagrams are sent again, as they came, to a `collect` process on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import socket
import struct
import csv
import io
from collections import Counter
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ingest.xrootd_monitoring.capture import read_capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cachescope.config import load_config
from ingest.xrootd_monitoring.assemble import Assembler, server_name

CLI = str(Path(sys.executable).parent / "cachescope")
LAB = Path(__file__).resolve().parents[5] / "shared" / "xcache-lab" / "captures"
if not LAB.is_dir():
    LAB = Path("/work/shared/xcache-lab/captures")
RUNS = sorted(p.name for p in LAB.glob("run*")) if LAB.is_dir() else []

pytestmark = pytest.mark.skipif(not RUNS, reason="the xcache-lab captures are not here")


def datagrams(run: str) -> list[bytes]:
    """A capture's payloads in arrival order."""
    return read_capture(LAB / run / "udp.bin.gz")


def is_json_gstream(d: bytes) -> bool:
    return d[:1] == b"{" and b'"code":"g"' in d[:40]


class Collect:
    """A `cachescope collect` child on 127.0.0.1 (a free port of its own), rejects to a file."""

    def __init__(self, tmp: Path, *extra: str, name: str = "out"):
        self.out = tmp / f"{name}.jsonl"
        self.rejects = tmp / f"{name}.rejects.jsonl"
        self.proc = subprocess.Popen(
            [CLI, "collect", "--listen", "udp://127.0.0.1:0", "--out", str(self.out), "--rejects", str(self.rejects),
             "--stats", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # a child we signal gets SIGINT's default even when the suite runs in the background
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        line = self.proc.stderr.readline().decode()
        m = re.search(r"listening on udp://([\d.]+):(\d+)", line)
        assert m, line + self.proc.stderr.read().decode()
        self.address = (m.group(1), int(m.group(2)))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, payloads) -> None:
        for d in payloads:
            self.sock.sendto(d, self.address)

    def finish(self, sig: int | None = signal.SIGTERM) -> tuple[list[dict], dict, str]:
        """Signal it (None: wait for --stop-after-idle); (events, stats, stderr) once it exited 0."""
        if sig is not None:
            self.proc.send_signal(sig)
        _, err = self.proc.communicate()
        self.sock.close()
        err = err.decode()
        assert self.proc.returncode == 0, err
        assert "Traceback" not in err
        stats = next(json.loads(ln)["stats"] for ln in err.splitlines() if ln.startswith('{"stats"'))
        return [orjson.loads(ln) for ln in self.out.read_bytes().splitlines()], stats, err


def parse_reference(run: str, tmp: Path, origin: str) -> list[dict]:
    """`cachescope parse --format xrootd-gstream` of the capture's decoded g-stream (decode.py's
    JSONL). A binary g-stream names no host (decode.py looked ahead to the ident, which XRootD sends
    only after `ident` seconds): collect names it by its sender, so the reference's headers do too."""
    lines = (LAB / run / "gstream.jsonl").read_text().splitlines()
    if not any(is_json_gstream(d) for d in datagrams(run)):
        host = server_name("127.0.0.1")
        lines = [json.dumps({**json.loads(ln), "src": {"site": "", "host": host}}) if ln.startswith('{"code":"g"')
                 else ln for ln in lines]
    src = tmp / f"{run}.gstream.jsonl"
    src.write_text("\n".join(lines) + "\n")
    p = subprocess.run([CLI, "parse", "--format", "xrootd-gstream", "--origin", origin, str(src)],
                       capture_output=True, check=True)
    return [orjson.loads(ln) for ln in p.stdout.splitlines()]


def origin_of(stats: dict) -> str:
    (server,) = stats["servers"]
    return server["origin"]


#: accesses each capture gives: its client reads but for those whose g-stream record XRootD had not
#: sent when the capture ended (run3 2, run4 6, run5 1: no record, no lost datagram, none counted)
ACCESSES = {"run1-default": 1000, "run2-prefetch0": 300, "run3-prefetch0-asyncoff": 148, "run4-asyncoff": 114,
            "run5-json-insthdr-slow-origin": 119}
OBSERVED = ("observed_hit_bytes", "observed_miss_bytes", "observed_bypass_bytes")


def client_reads(run: str) -> list[dict]:
    return list(csv.DictReader(io.TextIOWrapper(gzip.open(LAB / run / "workload.csv.gz"))))


@pytest.mark.parametrize("run", RUNS)
def test_a_capture_gives_the_events_parse_gives_for_its_records(run, tmp_path):
    c = Collect(tmp_path)
    c.send(datagrams(run))
    events, stats, _ = c.finish()
    ref = parse_reference(run, tmp_path, origin_of(stats))
    assert len(events) == ACCESSES[run] >= len(ref) > 100
    assert [e["seq"] for e in events] == list(range(len(events)))
    # a record is its accesses as `parse` reads it, but for a record covering k > 1 f-stream opens:
    # k accesses whose bytes and observed bytes sum to the record's
    records = {(r["lfn"], r["attach_t"] * 1_000_000): r for r in map(json.loads, (LAB / run / "gstream.jsonl")
               .read_text().splitlines()) if r.get("event") == "file_close"}
    by_record: dict = {}
    key = None
    for e in events:  # a record's accesses go out together: the first at its attach, the others after it
        if (e["path"], e["ts"]) in records or key is None or key[0] != e["path"]:
            key = (e["path"], e["ts"])
        by_record.setdefault(key, []).append(e)
    merged = 0
    for key, group in sorted(by_record.items()):
        refs = [r for r in ref if (r["path"], r["ts"]) == key]
        if len(group) == len(refs):
            assert [{**e, "seq": 0} for e in group] == [{**r, "seq": 0} for r in refs]
            continue
        assert len(refs) == 1 and len(group) > 1, key
        merged += len(group) - 1
        # the clients' bytes (the record's, clamped to the file size, may be less); its observed
        # bytes apportioned, none counted twice
        raw = records[key]
        assert sum(e["bytes_read"] for e in group) >= refs[0]["bytes_read"]
        for name, counter in zip(OBSERVED, ("b_hit", "b_miss", "b_bypass")):
            assert sum(e[name] for e in group) <= raw.get(counter, 0)
        assert all(sum(e[k] for k in OBSERVED) <= e["bytes_read"] for e in group)
        assert {k: v for k, v in group[0].items() if k not in ("seq", "bytes_read", "observed_hit", *OBSERVED)} == \
            {k: v for k, v in refs[0].items() if k not in ("seq", "bytes_read", "observed_hit", *OBSERVED)}
        # each open at its own time, in open order, within the record's attach..detach and deferral
        assert all(key[1] < e["ts"] <= (raw["detach_t"] + 30) * 1_000_000 for e in group[1:])
        assert [e["ts"] for e in group] == sorted(e["ts"] for e in group)
    assert len(events) == len(ref) + merged
    assert stats["dropped_datagrams"] == {} and stats["lost_datagrams"] == 0
    assert stats["servers"][0]["cache"] is True
    # the cache's f-stream opens are all left to its g-stream: no access counted twice
    assert stats["fstream_superseded"] == json.loads((LAB / run / "run-summary.json").read_text())["client_reads"]


def test_a_record_covering_several_opens_is_one_access_per_client_read(tmp_path):
    """run1: 6 client reads re-opened a file during its deferred detach; their records (4) stand for
    2-4 reads each. Every client read is one access, the merged ones with the client's bytes."""
    run = "run1-default"
    c = Collect(tmp_path)
    c.send(datagrams(run))
    events, stats, _ = c.finish()
    reads = client_reads(run)
    assert len(events) == len(reads) == 1000
    assert Counter(e["path"] for e in events) == Counter(r["path"] for r in reads)
    records = Counter((r["lfn"], r["attach_t"] * 1_000_000) for r in map(json.loads, (LAB / run / "gstream.jsonl")
                      .read_text().splitlines()) if r.get("event") == "file_close")
    of = []  # each access's record: the first at its attach, the others after it (at their opens)
    for e in events:
        of.append((e["path"], e["ts"]) if (e["path"], e["ts"]) in records or not of or of[-1][0] != e["path"]
                  else of[-1])
    accesses = Counter(of)
    groups = [key for key, n in accesses.items() if n > records[key]]
    assert sorted(accesses[key] - records[key] for key in groups) == [1, 1, 1, 3]  # 994 records + 6
    merged = [e for e, key in zip(events, of) if key in groups]
    for path, ts in groups:
        t0 = ts / 1e6  # its attach; the reads re-opened it until the deferred detach 30 s later
        covered = sorted(int(r["bytes_read"]) for r in reads
                         if r["path"] == path and t0 - 1 <= float(r["ts_start"]) <= t0 + 31)
        assert sorted(e["bytes_read"] for e, key in zip(events, of) if key == (path, ts)) == covered, path
    # the origin fetch of a merged record is counted once: one access has the verdict `fetched`
    for e in merged:
        assert e["observed_hit"] in (0, 1) and sum(e[k] for k in OBSERVED) <= e["bytes_read"]


def test_the_same_capture_sent_again_gives_the_same_events(tmp_path):
    run = RUNS[0]
    outputs = []
    for i in range(2):
        c = Collect(tmp_path, name=f"out{i}")
        c.send(datagrams(run))
        c.finish()
        outputs.append(c.out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0]


def test_lost_datagrams_are_counted_per_server_and_stream_not_guessed(tmp_path):
    run = "run1-default"
    payloads = datagrams(run)
    g = [i for i, d in enumerate(payloads) if d[:1] == b"g"]
    f = [i for i, d in enumerate(payloads) if d[:1] == b"f"]
    t = [i for i, d in enumerate(payloads) if d[:1] == b"t"]
    drop = set(g[10:15]) | {g[40]} | set(f[3:5]) | {t[50]}
    c = Collect(tmp_path)
    c.send(d for i, d in enumerate(payloads) if i not in drop)
    events, stats, _ = c.finish()
    assert stats["lost_datagrams"] == len(drop)
    assert stats["servers"][0]["lost"] == {"g": 6, "f": 2, "detail": 1}
    # the lost g-stream records' reads are the f-stream's accesses (bytes from the close/trace,
    # nothing the cache's record would say); reads whose f-stream datagram was lost too are not guessed
    fromf = [e for e in events if e["source"] == "xrootd-fstream"]
    assert fromf and all(e[k] is None for e in fromf for k in (*OBSERVED, "observed_hit"))
    assert len(events) - len(fromf) < 1000 and len(events) < 1000
    assert [e["seq"] for e in events] == list(range(len(events)))


def test_lost_g_stream_records_leave_their_reads_to_the_f_stream():
    payloads = datagrams("run1-default")
    g = [i for i, d in enumerate(payloads) if d[:1] == b"g"]
    drop = set(g[10:15]) | {g[40]}

    def run(kept):
        asm = Assembler(load_config(), name_of=lambda ip: ip)
        return _feed(asm, kept) + asm.finish(), asm

    whole, _ = run(payloads)
    events, asm = run([d for i, d in enumerate(payloads) if i not in drop])
    assert asm.stats.lost == 6
    assert len(events) == len(whole) == 1000 and [e.seq for e in events] == list(range(1000))
    assert Counter(e.path for e in events) == Counter(r["path"] for r in client_reads("run1-default"))
    fromf = [e for e in events if e.source == "xrootd-fstream"]
    assert fromf
    assert all(e.observed_hit is None and e.observed_hit_bytes is None for e in fromf)
    # the reads' bytes, from the f-stream's close and trace records
    assert all(0 < e.bytes_read <= e.file_size for e in fromf)


def test_a_restarted_server_is_a_new_stream(tmp_path):
    payloads = datagrams("run3-prefetch0-asyncoff")

    def restarted(d: bytes) -> bytes:  # the same server, started 1000 s later
        if d[:1] == b"{":
            return d
        return d[:4] + struct.pack(">i", struct.unpack_from(">i", d, 4)[0] + 1000) + d[8:]

    c = Collect(tmp_path)
    c.send(payloads)
    c.send(restarted(d) for d in payloads)
    events, stats, _ = c.finish()
    assert [s["stod"] for s in stats["servers"]] == [1795770265, 1795771265]
    assert stats["lost_datagrams"] == 0
    first = [e for e in events if e["origin"].endswith(":1795770265")]
    second = [e for e in events if e["origin"].endswith(":1795771265")]
    assert len(first) == len(second) == 148
    assert [e["seq"] for e in second] == list(range(148))


def garbage() -> list[bytes]:
    return [b"", b"\x00", b"hello world", b"g" + b"\x01" * 5, os.urandom(300),
            b"f\x07\x00\x40" + b"\x00" * 8,  # header says 64 bytes, 12 came
            b"t\x05\x00\x20" + struct.pack(">i", 1795769564) + b"\x01" * 24,  # 24 bytes of trace: not whole entries
            b"d\x09\x00\x10" + struct.pack(">i", 1) + b"\x00" * 8 + b"\x07" * 60000,  # far longer than its header says
            b'{"code":"g","pseq":', b'{"code":"g","pseq":1,"stod":"x"}', b"{" + b"\xff" * 100]


def test_garbage_truncated_and_oversized_datagrams_are_counted_and_dropped(tmp_path):
    run = "run2-prefetch0"
    payloads = datagrams(run)
    bad = garbage()
    mixed = []
    for i, d in enumerate(payloads):
        mixed.append(d)
        if i % 40 == 0:
            mixed.append(bad[(i // 40) % len(bad)])
    c = Collect(tmp_path)
    c.send(mixed)
    events, stats, _ = c.finish()
    sent_bad = len(mixed) - len(payloads)
    assert sum(stats["dropped_datagrams"].values()) == sent_bad
    assert set(stats["dropped_datagrams"]) <= {"garbage", "truncated", "oversized"}
    assert len(events) == 300 and stats["lost_datagrams"] == 0
    rejects = [orjson.loads(ln) for ln in c.rejects.read_bytes().splitlines()]
    assert len(rejects) == sent_bad and all(r["reason"] for r in rejects)


@pytest.mark.parametrize("run", RUNS)
def test_a_storage_element_without_g_stream_gives_one_event_per_client_read(run, tmp_path):
    summary = json.loads((LAB / run / "run-summary.json").read_text())
    payloads = [d for d in datagrams(run) if d[:1] != b"g" and not is_json_gstream(d)]
    c = Collect(tmp_path)
    c.send(payloads)
    events, stats, _ = c.finish()
    assert len(events) == summary["client_reads"]
    assert {e["source"] for e in events} == {"xrootd-fstream"}
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert all(e["path"].startswith("/store/mc/LabXCache/") and e["client"] == "127.0.0.1" for e in events)
    assert all(0 < e["bytes_read"] <= e["file_size"] for e in events)
    # the client's bytes, but for reads past a file's size (xrdcp reads parts twice), which the
    # contract clamps to the file size (as for every format)
    assert 0.97 * summary["client_bytes"] <= sum(e["bytes_read"] for e in events) <= summary["client_bytes"]


def test_stop_after_idle_exits_0_with_everything_written(tmp_path):
    c = Collect(tmp_path, "--stop-after-idle", "1s")
    c.send(datagrams("run4-asyncoff"))
    events, stats, err = c.finish(sig=None)
    assert len(events) == 114 and "idle" in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_writes_everything_received_and_exits_0(sig, tmp_path):
    c = Collect(tmp_path)
    c.send(datagrams("run1-default"))  # on loopback a sent datagram is in the socket's buffer
    events, stats, err = c.finish(sig)
    assert len(events) == 1000 and stats["datagrams"] == 1540


def test_usage_errors_are_one_line_and_exit_2(tmp_path):
    for args in (["--listen", "tcp://127.0.0.1:1", "--out", "-"], ["--listen", "udp://127.0.0.1:0"],
                 ["--listen", "udp://127.0.0.1:0", "--out", "-", "--to", "kafka://h:1/t"],
                 ["--listen", "udp://127.0.0.1:0", "--out", "-", "--stop-after-idle", "soon"]):
        p = subprocess.run([CLI, "collect", *args], capture_output=True, text=True)
        assert p.returncode == 2, args
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:  # a port in use: usage, one line
        busy.bind(("127.0.0.1", 0))
        p = subprocess.run([CLI, "collect", "--listen", f"udp://127.0.0.1:{busy.getsockname()[1]}", "--out", "-"],
                           capture_output=True, text=True)
    assert p.returncode == 2 and "cannot listen there" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    with socket.socket() as s:  # a closed TCP port: no broker there
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    p = subprocess.run([CLI, "collect", "--listen", "udp://127.0.0.1:0", "--to", f"kafka://127.0.0.1:{closed}/t"],
                       capture_output=True, text=True)
    assert p.returncode == 1 and "unreachable" in p.stderr and len(p.stderr.strip().splitlines()) == 1


_SAMPLES = [d for run in RUNS[:1] for d in datagrams(run)[:200]]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.one_of(
    st.binary(max_size=2000),
    st.tuples(st.sampled_from(_SAMPLES or [b"g"]), st.integers(0, 2000), st.binary(max_size=40)).map(
        lambda x: x[0][:x[1]] + x[2]),
    st.tuples(st.sampled_from(_SAMPLES or [b"g"]), st.integers(0, 2000), st.integers(0, 255)).map(
        lambda x: x[0][:x[1]] + bytes([x[2]]) + x[0][x[1] + 1:]),
))
def test_no_datagram_crashes_the_decoder(data):
    a = Assembler(load_config(), name_of=lambda ip: ip)
    for d in _SAMPLES[:20]:
        a.feed(d, "127.0.0.1")
    a.feed(data, "127.0.0.1")
    a.finish()
    st_ = a.stats
    assert st_.datagrams == 21
    assert sum(1 for r in st_.reasons if r.startswith("internal error")) == 0


def test_serve_collect_receives_runs_the_caches_and_serves_the_events(tmp_path):
    import urllib.request

    with socket.socket() as s:  # a free TCP port for the API
        s.bind(("127.0.0.1", 0))
        api_port = s.getsockname()[1]
    store = tmp_path / "store"
    p = subprocess.Popen([CLI, "serve", "--store", str(store), "--port", str(api_port), "--collect",
                          "udp://127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = p.stderr.readline().decode()
        m = re.search(r"collecting XRootD monitoring on udp://([\d.]+):(\d+)", line)
        assert m, line + p.stderr.read().decode()
        payloads = datagrams("run1-default")
        g = [i for i, d in enumerate(payloads) if d[:1] == b"g"]
        lost = g[20]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for i, d in enumerate(payloads):
                if i != lost:
                    sock.sendto(d, (m.group(1), int(m.group(2))))
        body = json.dumps({"policy": "lru", "size": "1GB", "from": "2026-11-20T00:00:00Z",
                           "to": "2026-12-20T00:00:00Z"}).encode()

        def get(path: str, data: bytes | None = None) -> bytes:
            req = urllib.request.Request(f"http://127.0.0.1:{api_port}{path}", data=data,
                                         headers={"content-type": "application/json"})
            with urllib.request.urlopen(req) as r:
                return r.read()

        import time

        def metric(text: str, name: str) -> float | None:
            m = re.search(rf"^{name} (\S+)$", text, re.M)
            return float(m.group(1)) if m else None

        expected = None
        while True:  # until every datagram is decoded (an event, however long it takes) or serve exits
            try:
                text = get("/metrics").decode()
            except OSError:  # the API listens a moment after the collector
                text = ""
            if metric(text, "cachescope_collect_datagrams_total") == 1539:
                expected = int(metric(text, "cachescope_collect_events_total"))
                break
            assert p.poll() is None, p.stderr.read().decode()
            time.sleep(0.1)
        assert expected is not None and expected > 900
        answer = None
        while True:  # the events reach the store a moment after they are decoded (or serve exits)
            answer = json.loads(get("/v1/whatif", body))
            if answer["requests"] == expected:
                break
            assert p.poll() is None, p.stderr.read().decode()
            time.sleep(0.2)
        assert answer is not None and answer["requests"] == expected
        metrics = get("/metrics").decode()
        assert "cachescope_collect_datagrams_total 1539.0" in metrics
        assert re.search(r'cachescope_collect_lost_datagrams_total\{[^}]*stream="g"\} 1\.0', metrics)
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate()
    assert p.returncode == 0, err.decode()
    assert "1 lost in sequence gaps" in err.decode()
    from cachescope.store import open_store

    with open_store(store_dir=store) as st:  # the collector's counts in pipeline_health
        rows = st.query("SELECT metric, max(value) FROM pipeline_health WHERE component = 'collect' "
                        "GROUP BY metric").rows
    assert dict(rows)["lost_datagrams"] == 1


def _feed(asm: Assembler, payloads) -> list:
    out = []
    for d in payloads:
        out += asm.feed(d, "127.0.0.1")
    return out


def test_a_storage_elements_accesses_go_out_as_its_f_stream_time_passes_the_hold():
    payloads = [d for d in datagrams("run1-default") if d[:1] != b"g"]
    asm = Assembler(load_config(), name_of=lambda ip: ip)
    during = _feed(asm, payloads)
    after = asm.finish()
    assert 0 < len(during) < 1000 and len(during) + len(after) == 1000  # live, not only at the end
    assert [e.seq for e in during + after] == list(range(1000))
    first_close = min(e.ts for e in during)
    assert all(e.ts >= first_close for e in after)


def test_a_cache_whose_g_stream_comes_late_within_the_hold_counts_no_access_twice():
    payloads = datagrams("run1-default")
    tod = [struct.unpack_from(">i", d, 16)[0] for d in payloads if d[:1] == b"f"]  # f-stream tBeg
    split = next(i for i, d in enumerate(payloads) if d[:1] == b"f"
                 and struct.unpack_from(">i", d, 16)[0] > tod[0] + 60)
    head, rest = payloads[:split], payloads[split:]
    asm = Assembler(load_config(), name_of=lambda ip: ip)
    # the first minute without its g-stream datagrams, which then come late (before the rest)
    events = _feed(asm, [d for d in head if d[:1] != b"g"])
    assert events == []  # held: the server may still turn out to be a cache
    events += _feed(asm, [d for d in head if d[:1] == b"g"] + rest) + asm.finish()
    assert len(events) == 1000 and {e.source for e in events} == {"xrootd-gstream"}
    assert asm.stats.superseded == 1000


@pytest.mark.parametrize("run", ["run1-default", "run5-json-insthdr-slow-origin"])
def test_stats_name_each_servers_xrootd_version_from_its_ident(run):
    """The ident record (binary `&ver=v5.5.3` or JSON `"ver":"v5.5.3"`) gives the version in the
    form the xcache model's `xrootd_version` takes; a 6.x one reads the same way."""
    from cachescope.xrdpfc import param_value
    from ingest.xrootd_monitoring import ident

    asm = Assembler(load_config(), name_of=lambda ip: ip)
    _feed(asm, datagrams(run))
    asm.finish()
    (server,) = asm.stats.as_dict(asm.streams)["servers"]
    assert server["xrootd_version"] == "5.5.3"
    assert param_value("xrootd_version", server["xrootd_version"]) == pytest.approx(5.05)
    six = ident.binary("xrootd/root.12:25@vm", "&pgm=xrootd&ver=v6.2.1&inst=anon&port=1095&site=X")
    assert ident.xrootd_version(six) == "6.2.1"
    assert ident.xrootd_version(None) is None
    assert ident.xrootd_version(ident.binary("x@h", "&pgm=xrootd&ver=unknown")) is None


def test_map_records_key_on_the_host_never_the_user_id():
    """5.5's `user.pid:sid@host` and 6.x's `root.<login number>:sid@host` give the same client."""
    from ingest.xrootd_monitoring.maps import client_host

    assert client_host("xroot/jdoe.4711:25@[::ffff:127.0.0.1]") == "127.0.0.1"
    assert client_host("xroot/root.3:25@[::ffff:127.0.0.1]") == "127.0.0.1"
    assert client_host("xroot/root.4:26@client.example.org") == "client.example.org"
