"""`cachescope collect` throughput: datagrams/s and events/s without loss, on a local burst.

A second process sends a lab capture of a real XRootD 5.5.3 cache (../shared/xcache-lab, default
run1-default: 1,540 datagrams, 994 g-stream accesses and the f-stream/trace/maps of 1,000 opens)
again and again to a `cachescope collect --out /dev/null` on 127.0.0.1, each repetition as a new
server run (its `stod` + k, so every packet sequence is whole), at --rate datagrams/s (0: as fast
as the sender can). It prints what was sent, what collect received and decoded (its --stats),
the datagrams lost between the two (sent - received), and collect's decoding rate: datagrams and
events over the time from the first datagram sent to the last decoded (collect exits after
--stop-after-idle, which is subtracted).

`--spool DIR` runs collect with its durable spool there (every datagram appended and fsynced
before it is decoded): run it with and without, side by side, for the spool's cost.

Run: .venv/bin/python scripts/bench_collect.py [--repeat 65] [--rate 20000] [--run run1-default] [--fstream-only]
     [--spool DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "cachescope")
LAB = REPO.parent / "shared" / "xcache-lab" / "captures"
if not LAB.is_dir():
    LAB = Path("/work/shared/xcache-lab/captures")


def datagrams(run: str) -> list[bytes]:
    from ingest.xrootd_monitoring.capture import read_capture

    return read_capture(LAB / run / "udp.bin.gz")


def restarted(d: bytes, k: int) -> bytes:
    """The datagram of the same server started k seconds later (a new stream)."""
    if d[:1] == b"{":
        return re.sub(rb'"stod":(\d+)', lambda m: b'"stod":%d' % (int(m.group(1)) + k), d, count=1)
    return d[:4] + struct.pack(">i", struct.unpack_from(">i", d, 4)[0] + k) + d[8:]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="run1-default")
    ap.add_argument("--repeat", type=int, default=65)
    ap.add_argument("--rate", type=float, default=20_000, help="datagrams/s (0: as fast as possible)")
    ap.add_argument("--fstream-only", action="store_true", help="leave out the g-stream (a storage element)")
    ap.add_argument("--idle", type=float, default=5.0, help="collect's --stop-after-idle (s): longer than any "
                                                           "stall of the sender on a loaded machine")
    ap.add_argument("--spool", default=None, help="collect's --spool DIR (emptied first)")
    a = ap.parse_args()
    IDLE = a.idle

    base = datagrams(a.run)
    if a.fstream_only:
        base = [d for d in base if d[:1] != b"g" and not d.startswith(b'{"code":"g"')]
    burst = [restarted(d, k * 1000) for k in range(a.repeat) for d in base]
    spool = []
    if a.spool:
        import shutil

        shutil.rmtree(a.spool, ignore_errors=True)
        spool = ["--spool", a.spool]
    proc = subprocess.Popen([EXE, "collect", "--listen", "udp://127.0.0.1:0", "--out", "/dev/null", "--rejects",
                             "/dev/null", "--stats", "--stop-after-idle", f"{IDLE}s", *spool],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    line = proc.stderr.readline().decode()
    m = re.search(r"listening on udp://([\d.]+):(\d+) \(receive buffer (\d+) MiB\)", line)
    if not m:
        print(line + proc.stderr.read().decode(), file=sys.stderr)
        return 1
    where = (m.group(1), int(m.group(2)))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    t0 = time.perf_counter()
    if a.rate > 0:
        step = 1.0 / a.rate
        for i, d in enumerate(burst):
            ahead = t0 + i * step - time.perf_counter()
            if ahead > 0.001:
                time.sleep(ahead)
            sock.sendto(d, where)
    else:
        for d in burst:
            sock.sendto(d, where)
    sent_s = time.perf_counter() - t0
    _, err = proc.communicate()
    total = time.perf_counter() - t0 - IDLE
    stats = next(json.loads(ln)["stats"] for ln in err.decode().splitlines() if ln.startswith('{"stats"'))
    out = {
        "run": a.run, "fstream_only": a.fstream_only, "repeat": a.repeat, "receive_buffer_mib": int(m.group(3)),
        "spool": bool(a.spool), "kernel_drops": stats.get("kernel_drops"),
        "sent": len(burst), "send_seconds": round(sent_s, 3), "send_rate": round(len(burst) / sent_s),
        "received": stats["datagrams"], "lost_before_collect": len(burst) - stats["datagrams"],
        "lost_in_sequences": stats["lost_datagrams"], "events": stats["events"],
        "seconds_to_last_decoded": round(total, 3),
        "datagrams_per_s": round(stats["datagrams"] / total), "events_per_s": round(stats["events"] / total),
    }
    # the decoder alone, in this process, in CPU seconds (what a loaded machine changes least)
    sys.path.insert(0, str(REPO))
    from cachescope.config import load_config
    from ingest.xrootd_monitoring.assemble import Assembler

    asm = Assembler(load_config(), name_of=lambda ip: ip)
    c0 = time.process_time()
    n_events = sum(len(asm.feed(d, "127.0.0.1")) for d in burst) + len(asm.finish())
    cpu = time.process_time() - c0
    out.update(decode_cpu_seconds=round(cpu, 3), decode_datagrams_per_cpu_s=round(len(burst) / cpu),
               decode_events_per_cpu_s=round(n_events / cpu), loadavg=open("/proc/loadavg").read().split()[:3])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
