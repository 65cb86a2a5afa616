"""The collector's durable spool: what arrives is on disk before it is decoded, and a restart after
kill -9 or SIGTERM of `serve --collect` or `collect --to kafka://` stores (ships) every access
received exactly once, with the same identities and rows as one uninterrupted run. A lab capture
of a real XRootD 5.5.3 cache (../shared/xcache-lab) is sent to real processes on 127.0.0.1; every
wait is for an event (datagrams in the spool, a counter in /metrics), never a delay."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest

from ingest.xrootd_monitoring import spool
from ingest.xrootd_monitoring.capture import read_capture

CLI = str(Path(sys.executable).with_name("cachescope"))
LAB = Path(__file__).resolve().parents[5] / "shared" / "xcache-lab" / "captures"
if not LAB.is_dir():
    LAB = Path("/work/shared/xcache-lab/captures")
RUN = LAB / "run1-default" / "udp.bin.gz"
needs_lab = pytest.mark.skipif(not RUN.exists(), reason="the xcache-lab captures are not here")
#: the tables a run writes that are functions of the events (pipeline_health carries wall-clock times)
TABLES = ("access_events", "efficiency", "efficiency_hourly", "efficiency_daily", "mrc", "observed")


# ---------------------------------------------------------------------------------------- the files


def _records(directory: Path) -> list[tuple[bytes, str, int, int]]:
    segs = spool.segments(directory)
    if not segs:
        return []
    reader = spool.SpoolReader(directory, segs[0][0])
    out = []
    while batch := reader.read(1 << 62):
        out += batch
    reader.close()
    return out


def test_records_survive_across_segments_and_a_torn_tail_is_cut(tmp_path):
    d = tmp_path / "spool"
    end = spool.recover(d)
    w = spool.SpoolWriter(d, end, segment_bytes=1000)
    sent = [(i, f"10.0.0.{i % 7}", os.urandom(50 + i)) for i in range(40)]
    for i, addr, payload in sent:
        w.append(spool.encode(i, addr.encode(), payload))
    w.close()
    assert len(spool.segments(d)) > 3  # it rolled
    got = _records(d)
    assert [(p, a, t) for p, a, t, _ in got] == [(p, a, i) for i, a, p in sent]
    # a power cut mid-write: half a record at the end of the newest segment
    last = spool.segments(d)[-1][1]
    with open(last, "ab") as f:
        f.write(spool.encode(99, b"10.0.0.1", b"x" * 80)[:30])
    assert spool.recover(d) == got[-1][3]  # cut back to the last whole record
    w = spool.SpoolWriter(d, spool.recover(d), segment_bytes=1000)
    w.append(spool.encode(100, b"10.0.0.9", b"after"))
    w.close()
    assert [r[0] for r in _records(d)][-2:] == [sent[-1][2], b"after"]


def test_a_reader_resumes_at_a_position_and_counts_what_the_bounds_removed(tmp_path):
    d = tmp_path / "spool"
    w = spool.SpoolWriter(d, spool.recover(d), segment_bytes=500)
    for i in range(30):
        w.append(spool.encode(i, b"127.0.0.1", bytes([i]) * 100))
    w.close()
    got = _records(d)
    mid = got[9][3]
    r = spool.SpoolReader(d, mid)
    assert [p for p, *_ in r.read(1 << 62)] == [bytes([i]) * 100 for i in range(10, 30)]
    r.close()
    # stored up to `mid`: the segments wholly before it go, nothing undecoded is lost
    assert spool.prune(d, mid, max_bytes=1 << 30, max_age_s=1e9) == 0
    assert spool.segments(d)[0][0] <= mid
    # beyond max_bytes the oldest go although not decoded: counted by the prune and by the reader
    lost = spool.prune(d, mid, max_bytes=600, max_age_s=1e9)
    assert lost > 0
    r = spool.SpoolReader(d, mid)
    rest = r.read(1 << 62)
    assert r.skipped_bytes == lost
    assert len(rest) + 10 < 30 and rest[-1][0] == bytes([29]) * 100


def test_the_tail_is_the_last_records_across_segments(tmp_path):
    """What a bus source reads at its start (the records a killed run may not have acked)."""
    d = tmp_path / "spool"
    w = spool.SpoolWriter(d, spool.recover(d), segment_bytes=300)
    for i in range(25):
        w.append(spool.encode(i, f"10.0.0.{i}".encode(), bytes([i]) * 90))
    w.close()
    assert len(spool.segments(d)) > 4
    key = lambda payload, addr: (payload[0], addr)  # noqa: E731
    assert spool.tail(d, 7, key) == [(i, f"10.0.0.{i}") for i in range(18, 25)]
    assert spool.tail(d, 100, key) == [(i, f"10.0.0.{i}") for i in range(25)]
    (tmp_path / "empty").mkdir()
    assert spool.tail(tmp_path / "empty", 5, key) == []


def test_a_cursor_gives_each_record_once_and_resumes_where_told(tmp_path):
    d = tmp_path / "spool"
    w = spool.SpoolWriter(d, spool.recover(d), segment_bytes=400)
    ends = [w.append(spool.encode(i, b"127.0.0.1", bytes([i]) * 100)) for i in range(12)]
    c = spool.SpoolCursor(d, 0)
    got = []
    while (item := c.next(ends[5])) is not None:
        got.append(item[0][0])
    assert got == list(range(6)) and c.pos == ends[5] and not c.behind(ends[5]) and c.behind(ends[-1])
    c.pos = ends[8]  # resumed: what before it is stored
    assert c.next(ends[-1])[0][0] == 9 and c.pos == ends[9]
    c.close()
    w.close()


# ---------------------------------------------------------------------------------------- processes


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _wait_gone(pid: int) -> None:
    """The receiving process of a killed collector notices and exits (it holds the port until then)."""
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return
        if state == "Z":
            return
        _poll()


def _poll() -> None:
    # waiting for another process's event: yield the CPU briefly (a poll, not a timed expectation)
    import select

    select.select([], [], [], 0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_started: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _stop_what_is_left():
    """A failed test leaves no process behind: what it started and did not stop is killed, by PID."""
    yield
    while _started:
        p = _started.pop()
        if p.poll() is None:
            kids = _children(p.pid)
            p.kill()
            p.communicate()
            for c in kids:
                _wait_gone(c)


def _spooled(directory: Path) -> int:
    return len(_records(directory)) if directory.is_dir() else 0


class Serve:
    def __init__(self, store: Path, args: tuple | list = ()):
        self.store = store
        self.api = _free_port()
        self.p = subprocess.Popen([CLI, "serve", "--store", str(store), "--port", str(self.api), "--collect",
                                   "udp://127.0.0.1:0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        _started.append(self.p)
        line = self.p.stderr.readline().decode()
        m = re.search(r"collecting XRootD monitoring on udp://([\d.]+):(\d+)", line)
        assert m, line + self.p.stderr.read().decode()
        self.udp = (m.group(1), int(m.group(2)))
        self.recv = [c for c in _children(self.p.pid)
                     if "recv_process" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")]
        assert len(self.recv) == 1
        while True:  # the API answers (from here on a SIGTERM is uvicorn's to handle)
            try:
                if self.get("/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert self.p.poll() is None, self.p.stderr.read().decode()
            _poll()

    def send(self, payloads: list[bytes]) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for d in payloads:
                sock.sendto(d, self.udp)

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api}{path}") as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def metric(self, name: str) -> float | None:
        try:
            _, text = self.get("/metrics")
        except OSError:  # the API listens a moment after the collector
            return None
        m = re.search(rf"^{name} (\S+)$", text.decode(), re.M)
        return float(m.group(1)) if m else None

    def wait_decoded(self, n: int) -> None:
        while self.metric("cachescope_collect_datagrams_total") != n:
            assert self.p.poll() is None, self.p.stderr.read().decode()
            _poll()

    def wait_written(self, n: int) -> None:
        """Every decoded access in the store: the what-if over everything counts them."""
        body = json.dumps({"policy": "lru", "size": "1GB", "from": "2026-11-20T00:00:00Z",
                           "to": "2026-12-20T00:00:00Z"}).encode()
        while True:
            req = urllib.request.Request(f"http://127.0.0.1:{self.api}/v1/whatif", data=body,
                                         headers={"content-type": "application/json"})
            with urllib.request.urlopen(req) as r:
                if json.loads(r.read())["requests"] == n:
                    return
            assert self.p.poll() is None, self.p.stderr.read().decode()
            _poll()

    def stop(self, sig: int = signal.SIGTERM) -> str:
        self.p.send_signal(sig)
        _, err = self.p.communicate()
        if sig == signal.SIGKILL:
            for c in self.recv:
                _wait_gone(c)
        else:
            assert self.p.returncode == 0, err.decode()
        return err.decode()


def _tables(store: Path) -> dict[str, list]:
    from cachescope.store import open_store

    out = {}
    with open_store(store_dir=store) as st:
        for t in TABLES:
            rows = st.query(f"SELECT * FROM {t} FINAL").rows
            out[t] = sorted(map(repr, rows))
        out["identities"] = st.query("SELECT count(), uniqExact(cache_group, origin, seq) FROM access_events FINAL").rows
    return out


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The capture through one `serve --collect` from start to end (SIGTERM after the last access)."""
    payloads = read_capture(RUN)
    store = tmp_path_factory.mktemp("whole") / "store"
    s = Serve(store)
    s.send(payloads)
    s.wait_decoded(len(payloads))
    n = int(s.metric("cachescope_collect_events_total"))
    s.wait_written(n)
    s.stop()
    return n, _tables(store)


@needs_lab
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_serve_collect_restarted_mid_capture_stores_what_one_run_stores(sig, uninterrupted, tmp_path):
    n, whole = uninterrupted
    payloads = read_capture(RUN)
    half = len(payloads) // 2
    store = tmp_path / "store"
    s = Serve(store)
    s.send(payloads[:half])
    while _spooled(store / "spool") < half:  # received: on disk, whatever the decoder has done
        _poll()
    s.stop(sig)
    s = Serve(store)
    s.send(payloads[half:])
    s.wait_decoded(len(payloads))  # the counts go on from the checkpoint
    assert s.metric("cachescope_collect_events_total") == n
    s.wait_written(n)
    s.stop()
    got = _tables(store)
    (total, distinct), = whole["identities"]
    assert total == distinct >= n > 900  # (the held accesses are written at the stop)
    assert got["identities"] == whole["identities"]
    for t in TABLES:
        assert got[t] == whole[t], t


@needs_lab
def test_identities_continue_after_the_store_when_the_spool_is_gone(tmp_path):
    """A new spool beside a store that has the origin: seq goes on after the stored one."""
    import shutil

    payloads = read_capture(RUN)
    half = len(payloads) // 2
    store = tmp_path / "store"
    s = Serve(store)
    s.send(payloads[:half])
    s.wait_decoded(half)
    s.stop()
    shutil.rmtree(store / "spool")
    s = Serve(store)
    s.send(payloads[half:])
    s.wait_decoded(len(payloads) - half)
    s.stop()
    from cachescope.store import open_store

    with open_store(store_dir=store) as st:
        (total, distinct), = st.query("SELECT count(), uniqExact(cache_group, origin, seq) FROM access_events FINAL").rows
    assert total == distinct > 900


def test_kernel_drops_are_counted(tmp_path):
    """The receiving process stopped while a burst overflows a small receive buffer: the kernel's
    drops are in --stats, and every datagram is either decoded or counted as dropped."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("ingest:\n  receive_buffer_bytes: 65536\n")
    p = subprocess.Popen([CLI, "collect", "--listen", "udp://127.0.0.1:0", "--out", str(tmp_path / "out.jsonl"),
                          "--config", str(cfg), "--stats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _started.append(p)
    line = p.stderr.readline().decode()
    m = re.search(r"listening on udp://([\d.]+):(\d+)", line)
    assert m, line + p.stderr.read().decode()
    (recv,) = [c for c in _children(p.pid) if "recv_process" in Path(f"/proc/{c}/cmdline").read_text()]
    os.kill(recv, signal.SIGSTOP)
    sent = 3000
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for i in range(sent):
                sock.sendto(b"\x00" * 1000, (m.group(1), int(m.group(2))))
    finally:
        os.kill(recv, signal.SIGCONT)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate()
    assert p.returncode == 0, err.decode()
    stats = next(orjson.loads(ln)["stats"] for ln in err.decode().splitlines() if ln.startswith('{"stats"'))
    assert stats["kernel_drops"] > 0
    assert stats["datagrams"] + stats["kernel_drops"] == sent
    assert f"{stats['kernel_drops']} dropped by the kernel" in err.decode()


class Collect:
    def __init__(self, to: str, collector_id: str, spool_dir: Path):
        self.p = subprocess.Popen([CLI, "collect", "--listen", "udp://127.0.0.1:0", "--to", to, "--collector-id",
                                   collector_id, "--spool", str(spool_dir), "--stats"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _started.append(self.p)
        line = self.p.stderr.readline().decode()
        m = re.search(r"listening on udp://([\d.]+):(\d+)", line)
        assert m, line + self.p.stderr.read().decode()
        self.udp = (m.group(1), int(m.group(2)))
        self.recv = [c for c in _children(self.p.pid)
                     if "recv_process" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")]

    def send(self, payloads: list[bytes]) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for d in payloads:
                sock.sendto(d, self.udp)

    def stop(self, sig: int = signal.SIGTERM) -> dict | None:
        self.p.send_signal(sig)
        _, err = self.p.communicate()
        if sig == signal.SIGKILL:
            for c in self.recv:
                _wait_gone(c)
            return None
        assert self.p.returncode == 0, err.decode()
        return next(orjson.loads(ln)["stats"] for ln in err.decode().splitlines() if ln.startswith('{"stats"'))


def _poisoned(payloads: list[bytes]) -> tuple[list[bytes], int]:
    """The capture with one g-stream record's size and b_miss set to 2^63 (a value no u64 sum
    holds in the signed columns); its index."""
    import struct

    i = [k for k, d in enumerate(payloads) if d[:1] == b"g" and b'"file_close"' in d][10]
    d = payloads[i]
    start = d.index(b'{"event":"file_close"')
    end = d.find(b"\n", start)
    end = len(d) if end < 0 else end
    rec = re.sub(rb'"size":\d+', b'"size":9223372036854775808', d[start:end], count=1)
    rec = re.sub(rb'"b_miss":\d+', b'"b_miss":9223372036854775808', rec, count=1)
    out = d[:start] + rec + d[end:]
    out = out[:2] + struct.pack(">H", len(out)) + out[4:]
    return payloads[:i] + [out] + payloads[i + 1:], i


@needs_lab
def test_one_value_out_of_range_is_a_reject_and_the_live_mode_goes_on(tmp_path):
    from cachescope.config import load_config
    from ingest.xrootd_monitoring.assemble import Assembler

    payloads, _ = _poisoned(read_capture(RUN))
    asm = Assembler(load_config())
    ref = []
    for p in payloads:
        ref += asm.feed(p, "127.0.0.1")
    ref += asm.finish()
    storable = [e for e in ref if e.file_size < 1 << 63 and (e.observed_miss_bytes or 0) < 1 << 63]
    assert len(storable) < len(ref) or asm.stats.rejected  # the record is out of range either way
    store = tmp_path / "store"
    s = Serve(store)
    s.send(payloads)
    s.wait_decoded(len(payloads))
    assert s.get("/healthz")[0] == 200
    s.stop()
    from cachescope.store import open_store

    with open_store(store_dir=store) as st:
        (stored,), = st.query("SELECT count() FROM access_events FINAL").rows
    assert stored == len(storable) > 900
    rejects = [orjson.loads(ln) for ln in (store / "rejects.jsonl").read_bytes().splitlines()]
    assert any("9223372036854775808" in json.dumps(r) or "cannot hold" in r["reason"] for r in rejects), rejects


@needs_lab
def test_an_error_that_stops_ingestion_makes_healthz_503_with_the_reason(tmp_path):
    """The spool's directory removed under a running `serve --collect`: the next checkpoint
    fails; /healthz says so at once, pipeline health and /metrics show it, serve exits 1."""
    import shutil

    store = tmp_path / "store"
    store.mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("ingest:\n  spool:\n    checkpoint_seconds: 0.001\n")
    s = Serve(store, ["--config", str(cfg)])
    payloads = read_capture(RUN)
    s.send(payloads[:100])
    s.wait_decoded(100)
    shutil.rmtree(store / "spool")
    s.send(payloads[100:200])
    while (answer := s.get("/healthz"))[0] != 503:
        assert s.p.poll() is None, s.p.stderr.read().decode()
        _poll()
    assert "collect stopped ingesting" in answer[1].decode() and "FileNotFoundError" in answer[1].decode()
    assert s.metric("cachescope_collect_ingestion_stopped") == 1
    s.p.send_signal(signal.SIGTERM)
    _, err = s.p.communicate()
    assert s.p.returncode == 1 and "collect: " in err.decode() and "Traceback" not in err.decode(), err.decode()
    from cachescope.store import open_store

    with open_store(store_dir=store) as st:
        rows = dict(st.query("SELECT metric, max(value) FROM pipeline_health WHERE component = 'collect' "
                             "GROUP BY metric").rows)
    assert rows["ingestion_stopped"] == 1


@needs_lab
def test_datagrams_sent_while_nothing_listens_are_counted_as_lost(tmp_path):
    payloads = read_capture(RUN)
    half, gone = len(payloads) // 2, 5
    store = tmp_path / "store"
    s = Serve(store)
    s.send(payloads[:half])
    s.wait_decoded(half)
    s.stop()
    s = Serve(store)  # the packet sequences go on from the checkpoint: the gap shows
    s.send(payloads[half + gone:])
    s.wait_decoded(len(payloads) - gone)
    _, text = s.get("/metrics")
    lost = sum(float(v) for v in re.findall(r"^cachescope_collect_lost_datagrams_total\{[^}]*\} (\S+)$",
                                             text.decode(), re.M))
    s.stop()
    assert lost == gone


@needs_lab
def test_collect_out_with_a_spool_restarted_by_kill_9_loses_nothing(tmp_path):
    """`--out FILE --spool DIR`: a line written after the last checkpoint may come again after a
    crash (same identity); every access is there, as one uninterrupted collector gives it."""
    import msgspec

    from cachescope.config import load_config
    from ingest.xrootd_monitoring.assemble import Assembler

    payloads = read_capture(RUN)
    half = len(payloads) // 2
    out, d = tmp_path / "out.jsonl", tmp_path / "spool"

    def start() -> tuple[subprocess.Popen, tuple[str, int], list[int]]:
        p = subprocess.Popen([CLI, "collect", "--listen", "udp://127.0.0.1:0", "--out", str(out), "--spool", str(d),
                              "--rejects", str(tmp_path / "rejects.jsonl"), "--stats"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _started.append(p)
        m = re.search(r"listening on udp://([\d.]+):(\d+)", p.stderr.readline().decode())
        assert m
        kids = [c for c in _children(p.pid) if "recv_process" in Path(f"/proc/{c}/cmdline").read_text()]
        return p, (m.group(1), int(m.group(2))), kids

    p, where, kids = start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for x in payloads[:half]:
            sock.sendto(x, where)
    while _spooled(d) < half:
        _poll()
    p.kill()
    p.communicate()
    for c in kids:
        _wait_gone(c)
    p, where, _ = start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for x in payloads[half:]:
            sock.sendto(x, where)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate()
    assert p.returncode == 0, err.decode()
    asm = Assembler(load_config())
    ref = []
    for x in payloads:
        ref += asm.feed(x, "127.0.0.1")
    ref = {(e.origin, e.seq): orjson.loads(msgspec.json.encode(e)) for e in ref}
    got: dict = {}
    for ln in out.read_bytes().splitlines():
        e = orjson.loads(ln)
        assert got.setdefault((e["origin"], e["seq"]), e) == e  # a repeat is the same access
    assert got == ref and len(ref) > 900


def test_an_unreadable_checkpoint_is_one_line_and_exit_1(tmp_path):
    store = tmp_path / "store"
    (store / "spool").mkdir(parents=True)
    (store / "spool" / f"live-{0:020d}.state").write_bytes(b"not a checkpoint")
    p = subprocess.run([CLI, "serve", "--store", str(store), "--port", str(_free_port()), "--collect",
                        "udp://127.0.0.1:0"], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    assert "checkpoint" in p.stderr and "cannot be read" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
