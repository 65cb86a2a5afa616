"""Bounded state whatever arrives: a cap on tracked server streams, idle streams closed with their
held accesses written, held records within a budget and never further ahead of their server's
clock than `collect.max_ahead_seconds`; peak memory of a real `collect` process under 100,000
datagrams with new start times stays under the documented 512 MiB, every real access stored."""

from __future__ import annotations

import json
import re
import signal
import socket
import struct
import subprocess
import time
from collections import Counter

import orjson
import pytest

from cachescope.config import load_config
from ingest.xrootd_monitoring.assemble import Assembler
from test_collect import CLI, RUNS, Collect, datagrams

pytestmark = pytest.mark.skipif(not RUNS, reason="the xcache-lab captures are not here")
RUN = "run1-default"
#: the documented bound (docs/operators.md "Plug in your XCache", docs/internals.md)
PEAK_BOUND_MIB = 512


def assembler(**collect) -> Assembler:
    return Assembler(load_config(collect=collect), name_of=lambda ip: ip)


def with_stod(d: bytes, stod: int, pseq: int | None = None) -> bytes:
    head = d[:1] + (bytes([pseq & 0xFF]) if pseq is not None else d[1:2]) + d[2:4]
    return head + struct.pack(">i", stod) + d[8:]


def flood_datagram(template: bytes, i: int) -> bytes:
    """A g-stream datagram of one real record, from a server run that starts anew each time."""
    record = template[24:].split(b"\n", 1)[0]
    body = template[8:24] + record + b"\0"
    return b"g" + bytes([i & 0xFF]) + struct.pack(">Hi", 8 + len(body), 1_000_000 + i) + body


def vm_hwm_mib(pid: int) -> float:
    """The high-water mark of resident memory of `pid` and its children (VmHWM, MiB; 0 once gone).
    Not ru_maxrss: that keeps the hiwater of the process it was forked from across exec, so a
    collector started by a grown pytest process would report pytest's size."""
    total = 0.0
    for q in [pid, *_children(pid)]:
        try:
            for line in open(f"/proc/{q}/status"):
                if line.startswith("VmHWM:"):
                    total = max(total, int(line.split()[1]) / 1024)
        except OSError:
            pass
    return total


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


class PeakWatch:
    """Samples `vm_hwm_mib(pid)` until the process exits (a high-water mark: each sample is the
    peak so far, so the samples only have to come before the exit)."""

    def __init__(self, pid: int):
        import threading

        self.pid, self.peak, self._done = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, vm_hwm_mib(self.pid))

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.peak


def udp_queue(port: int) -> tuple[int, int]:
    """(bytes queued, datagrams dropped) of the UDP socket on 127.0.0.1:port (/proc/net/udp)."""
    for line in open("/proc/net/udp").read().splitlines()[1:]:
        f = line.split()
        if f[1] == f"0100007F:{port:04X}":
            return int(f[4].split(":")[1], 16), int(f[12])
    raise AssertionError(f"no UDP socket on 127.0.0.1:{port}")


def test_peak_memory_stays_bounded_under_100000_new_server_streams_and_every_real_access_is_stored(tmp_path):
    payloads = datagrams(RUN)
    template = next(d for d in payloads if d[:1] == b"g")
    plain = Collect(tmp_path, name="plain")
    plain.send(payloads)
    ref, _, _ = plain.finish()
    out, rejects = tmp_path / "flood.jsonl", tmp_path / "flood.rejects.jsonl"
    p = subprocess.Popen([CLI, "collect", "--listen", "udp://127.0.0.1:0", "--out", str(out), "--rejects",
                          str(rejects), "--stats"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    line = p.stderr.readline().decode()
    m = re.search(r"listening on udp://([\d.]+):(\d+)", line)
    assert m, line
    address = (m.group(1), int(m.group(2)))
    watch = PeakWatch(p.pid)
    n, real = 100_000, iter(payloads)
    every = n // len(payloads)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(n):
            s.sendto(flood_datagram(template, i), address)
            if i % every == 0:
                d = next(real, None)
                if d is not None:
                    s.sendto(d, address)
            if i % 2000 == 1999:  # the receiver keeps up with the socket: nothing is dropped by the kernel
                while udp_queue(address[1])[0] > 1 << 20:
                    time.sleep(0.001)
        for d in real:
            s.sendto(d, address)
    assert udp_queue(address[1])[1] == 0
    p.send_signal(signal.SIGTERM)
    err = p.stderr.read().decode()
    p.wait()
    peak_mib = watch.stop()  # the collector and its receiving process, the larger
    assert p.returncode == 0, err
    stats = next(json.loads(ln)["stats"] for ln in err.splitlines() if ln.startswith('{"stats"'))
    print(f"collect peak {peak_mib:.0f} MiB under {n:,} new server streams")
    assert peak_mib <= PEAK_BOUND_MIB, f"peak {peak_mib:.0f} MiB"
    assert stats["datagrams"] == n + len(payloads) and stats["lost_datagrams"] == 0
    assert stats["streams_closed_by"]["cap"] >= n - load_config().collect.max_streams
    origin = ref[0]["origin"]
    events = [orjson.loads(ln) for ln in out.read_bytes().splitlines()]
    assert [e for e in events if e["origin"] == origin] == ref
    assert len(events) == len(ref) + n  # each flood datagram's record too, once
    assert len({(e["origin"], e["seq"]) for e in events}) == len(events)


def test_records_dated_far_ahead_of_their_server_are_rejects_never_held():
    payloads = datagrams(RUN)
    g = [d for d in payloads if d[:1] == b"g"]
    stod = struct.unpack_from(">i", g[0], 4)[0] + 1

    def ahead(d: bytes) -> bytes:  # every detach_t ten years later (same length: the headers stay true)
        return re.sub(rb'"detach_t":(\d{10})', lambda m: b'"detach_t":' + str(int(m.group(1)) + 315_360_000).encode(), d)

    asm = assembler()
    far = [with_stod(ahead(g[i % len(g)]), stod, pseq=i) for i in range(1000)]
    records = sum(d.count(b'"event":"file_close"') for d in far)
    out = []
    for i, d in enumerate(payloads):
        out += asm.feed(d, "127.0.0.1", now=0.0)
        out += asm.feed(far[i % len(far)], "127.0.0.1", now=0.0) if i < len(far) else []
    held = asm.streams[("127.0.0.1", stod)]
    assert held.gheld == [] and held.size < 100  # nothing of them waits
    out += asm.finish()
    assert asm.stats.rejected == records
    assert sum(n for r, n in asm.stats.reasons.items() if "max_ahead_seconds" in r) == records
    assert len(out) == 1000 and all(e.origin.endswith(str(stod - 1)) for e in out)


def test_an_idle_stream_is_closed_with_its_accesses_written_and_numbers_on_when_it_comes_back():
    payloads = datagrams(RUN)
    half = len(payloads) // 2
    asm = assembler(stream_idle_seconds=600)
    first = []
    for d in payloads[:half]:
        first += asm.feed(d, "127.0.0.1", now=0.0)
    first += asm.tick(now=599.0)
    assert asm.stats.streams_closed["idle"] == 0
    first += asm.tick(now=600.0)
    assert asm.stats.streams_closed["idle"] == 1 and asm.streams == {} and asm.held == 0
    second = []
    for d in payloads[half:]:
        second += asm.feed(d, "127.0.0.1", now=601.0)
    second += asm.finish()
    events = first + second
    assert first and second
    assert [e.seq for e in events] == list(range(len(events)))  # one origin, numbering continued
    assert len({e.origin for e in events}) == 1
    assert Counter(e.path for e in events) <= Counter(e.path for e in _whole(payloads))


def _whole(payloads) -> list:
    asm = assembler()
    out = []
    for d in payloads:
        out += asm.feed(d, "127.0.0.1", now=0.0)
    return out + asm.finish()


def test_past_the_stream_cap_the_one_idle_longest_is_closed_never_a_server_that_keeps_sending():
    payloads = datagrams("run3-prefetch0-asyncoff")
    stod = struct.unpack_from(">i", payloads[0], 4)[0]
    asm = assembler(max_streams=4)
    events = []
    for i, d in enumerate(payloads):
        events += asm.feed(d, "127.0.0.1", now=0.0)
        for k in range(3):  # three one-datagram server runs beside each real datagram
            events += asm.feed(with_stod(d, 2_000_000 + 3 * i + k), "127.0.0.1", now=0.0)
        assert len(asm.streams) <= 4
        assert ("127.0.0.1", stod) in asm.streams  # the real one was never closed
    events += asm.finish()
    assert asm.stats.streams_closed["cap"] == 3 * len(payloads) - 3
    real = [e for e in events if e.origin.endswith(f":{stod}")]
    assert len(real) == 148 and [e.seq for e in real] == list(range(148))
    assert len({(e.origin, e.seq) for e in events}) == len(events)


def test_held_records_stay_within_the_budget():
    payloads = datagrams(RUN)
    stod = struct.unpack_from(">i", payloads[0], 4)[0]
    path_map = next(d for d in payloads if d[:1] == b"d")
    asm = assembler(max_held_records=5000)
    for i in range(20_000):  # path maps of new file ids from another server run, none ever used
        d = with_stod(path_map, stod + 7, pseq=i)
        d = d[:8] + struct.pack(">I", 10_000 + i) + d[12:]
        asm.feed(d, "127.0.0.1", now=0.0)
        assert asm.held <= 5000
    events = []
    for d in payloads:
        events += asm.feed(d, "127.0.0.1", now=0.0)
        assert asm.held <= 5000
    events += asm.finish()
    assert asm.stats.streams_closed["budget"] >= 3
    assert len(events) == 1000
