"""`cachescope collect --from amqp://` throughput: messages/s and events/s from a real RabbitMQ.

The lab capture (default run1-default: 1,540 datagrams, 1,000 accesses) is published --repeat times
as the shoveler publishes it (JSON, base64 datagram), each repetition a new server run (stod + k, as
scripts/bench_collect.py does), to a fresh durable queue; then `collect --from … --out FILE` consumes
them all, each delivered batch appended to its spool (FILE.spool) and fsynced before it is acked. The rate is over the time from its start to its
exit, less --stop-after-idle. Needs `scripts/services start rabbitmq` (RABBITMQ_URL from its env).

Run: .venv/bin/python scripts/bench_collect_bus.py [--repeat 20] [--run run1-default]
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import pika

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "cachescope")
_spec = importlib.util.spec_from_file_location("bench_collect", REPO / "scripts" / "bench_collect.py")
bench_collect = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_collect)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="run1-default")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--idle", type=float, default=3.0)
    a = ap.parse_args()
    env = subprocess.run([str(REPO / "scripts" / "services"), "env", "rabbitmq"], capture_output=True, text=True)
    if env.returncode != 0:
        print("bench_collect_bus: scripts/services start rabbitmq first", file=sys.stderr)
        return 1
    url = dict(ln.split("=", 1) for ln in env.stdout.splitlines() if "=" in ln)["RABBITMQ_URL"]
    name = f"bench-{uuid.uuid4().hex[:8]}"
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.exchange_declare(name, exchange_type="topic", durable=True)
    ch.queue_declare(name, durable=True)
    ch.queue_bind(name, name, routing_key="#")
    base = bench_collect.datagrams(a.run)
    n = 0
    t0 = time.perf_counter()
    for k in range(a.repeat):
        for d in base:
            body = orjson.dumps({"remote": "127.0.0.1:40001", "version": "bench",
                                 "data": base64.b64encode(bench_collect.restarted(d, k)).decode()})
            ch.basic_publish(name, "", body, pika.BasicProperties(delivery_mode=2))
            n += 1
    published = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        t0 = time.perf_counter()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([EXE, "collect", "--from", f"{url}?exchange={name}&queue={name}", "--out", str(out),
                            "--stats", "--stop-after-idle", f"{a.idle}s"], capture_output=True, text=True)
        wall = time.perf_counter() - t0 - a.idle
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return 1
        stats = next(json.loads(ln)["stats"] for ln in p.stderr.splitlines() if ln.startswith('{"stats"'))
        # the spool's checkpoints (position, decoder state, --out size) beside its segments
        ckpt_bytes = max((f.stat().st_size for f in Path(str(out) + ".spool").glob("out-*.state")), default=0)
    left = ch.queue_declare(name, passive=True).method.message_count
    ch.queue_delete(name)
    ch.exchange_delete(name)
    conn.close()
    print(json.dumps({"messages": n, "published_per_s": round(n / published), "consumed": stats["bus"]["messages"],
                      "acked": stats["bus"]["acked"], "left_on_queue": left, "events": stats["events"],
                      "seconds": round(wall, 2), "messages_per_s": round(stats["bus"]["messages"] / wall),
                      "events_per_s": round(stats["events"] / wall), "checkpoint_bytes": ckpt_bytes,
                      "cpu_seconds": round(cpu, 2), "messages_per_cpu_s": round(n / cpu), "loadavg": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
