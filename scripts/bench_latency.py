#!/usr/bin/env python
"""Event-to-row latency of the live streaming path: Kafka → Flink job → ClickHouse.

    .venv/bin/python scripts/bench_latency.py [--rate 20000] [--minutes 4] [--job-arg=--flush-seconds --job-arg=1]

A producer writes events stamped with the wall clock at a steady rate (batched messages of
2,500 events, as the shippers write them) while the job runs unbounded with the live-latency
windows (`max_out_of_orderness: 0s`, `allowed_lateness: 0s`; efficiency windows of --window
seconds, 10 by default so that a few minutes give enough windows for a p95).
A poller reads ClickHouse every 200 ms and records when each row first became visible:

- window latency: first visibility of a window's efficiency rows minus the window's end (the
  target is p95 ≤ 5 s: an event's row is visible within window length + 5 s);
- raw-event latency: the age of the newest access_events row at each poll.

Starts Kafka and ClickHouse with scripts/services when they are not running and stops what it
started.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

LIVE_CONFIG = """pipeline:
  windows:
    efficiency: {window}s
    curve: {curve}s
    max_out_of_orderness: 0s
    allowed_lateness: 0s
"""


def event_pool(n: int):
    """Realistic accesses (paths, sizes, tiers, one cache group) to re-stamp with the clock."""
    from bench_stream import parsed_accesses

    from cachescope.core.columns import EventColumns

    return EventColumns.from_events(parsed_accesses(n, 0.01, sites=1))


def produce(bootstrap: str, topic: str, pool, rate: float, seconds: float, stop: threading.Event) -> int:
    from kafka import KafkaProducer

    from cachescope.core.messages import encode_columns

    group = str(pool.cache_group[0])
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_request_size=16 * 2**20,
                             batch_size=2**20)
    per_message, sent, t0 = 2500, 0, time.time()  # as the shippers batch
    while not stop.is_set() and time.time() - t0 < seconds:
        due = int((time.time() - t0) * rate)
        while sent + per_message <= due:
            idx = np.arange(sent, sent + per_message) % len(pool)
            part = pool.take(idx)
            part.ts = np.full(per_message, int(time.time() * 1e6), dtype=np.int64)
            part.seq = np.arange(sent, sent + per_message, dtype=np.uint64)
            producer.send(topic, key=group.encode(), value=encode_columns(group, part))
            sent += per_message
        time.sleep(0.01)
    producer.flush()
    producer.close()
    return sent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=20_000, help="events per second produced")
    ap.add_argument("--minutes", type=float, default=4.0, help="how long the producer runs")
    ap.add_argument("--window", type=int, default=10, help="efficiency window in seconds (short: many windows "
                                                           "to take percentiles over)")
    ap.add_argument("--job-arg", action="append", default=[], help="extra argument for the job (repeatable)")
    args = ap.parse_args()

    from bench_stream import delete_run_topics, service, stop_started

    subprocess.run([str(REPO / "scripts/services"), "install", "flink-jars"], check=True)
    kafka_env, started_kafka = service("kafka")
    ch_env, started_ch = service("clickhouse")
    job = None
    try:
        from kafka.admin import KafkaAdminClient, NewTopic

        from cachescope.store import ClickHouseStore, migrations

        run = uuid.uuid4().hex[:8]
        topic, database = f"latency-{run}", f"latency_{run}"
        bootstrap = kafka_env["KAFKA_BOOTSTRAP"]
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
        store = ClickHouseStore(ch_env["CLICKHOUSE_URL"], database=database)
        migrations.migrate(store, events_ttl_days=0)
        pool = event_pool(200_000)
        tmp = Path(tempfile.mkdtemp())
        (tmp / "site.yaml").write_text(LIVE_CONFIG.format(window=args.window, curve=args.window * 6))
        cmd = [sys.executable, str(REPO / "flink-jobs/shadow_caches.py"), "--bootstrap", bootstrap,
               "--topic", topic, "--consumer-group", database, "--late-topic", topic + ".late",
               "--reject-topic", topic + ".rejects",
               "--clickhouse", ch_env["CLICKHOUSE_URL"].rsplit("/", 1)[0] + "/" + database,
               "--checkpoint-dir", str(tmp / "ckpt"), "--restart-attempts", "0", "--config", str(tmp / "site.yaml"),
               *args.job_arg]
        log = open(tmp / "job.log", "w")
        job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        # the job is up when its consumer group has joined; give the JVM and Python time to start
        time.sleep(25)
        stop = threading.Event()
        produced: list[int] = []
        producer = threading.Thread(target=lambda: produced.append(
            produce(bootstrap, topic, pool, args.rate, args.minutes * 60, stop)), daemon=True)
        t_start = time.time()
        producer.start()
        first_seen: dict[int, float] = {}
        raw_age: list[float] = []
        while producer.is_alive() or time.time() - t_start < args.minutes * 60 + 10:
            now = time.time()
            for (w,) in store.query("SELECT DISTINCT toUnixTimestamp(window_start) * 1000000 FROM efficiency").rows:
                first_seen.setdefault(int(w), now)
            newest = store.query("SELECT toUnixTimestamp64Micro(max(ts)), count() FROM access_events").rows[0]
            if newest[1] and now - t_start > 5:
                raw_age.append(now - newest[0] / 1e6)
            if job.poll() is not None:
                raise SystemExit(f"job exited with {job.returncode}: see {tmp / 'job.log'}")
            time.sleep(0.2)
        stop.set()
        producer.join()
        window_us = args.window * 1_000_000
        first_window = (int(t_start * 1e6) // window_us + 1) * window_us  # the first whole window
        lat = sorted(t - (w + window_us) / 1e6 for w, t in first_seen.items() if w >= first_window)
        rows = store.query("SELECT count() FROM access_events").scalar()
        print(f"# {produced[0]:,} events produced at {args.rate:,.0f}/s for {args.minutes:g} min, one cache group, "
              f"24 shadow caches, {args.window}-s windows, out-of-orderness 0 s, lateness 0 s; job args {args.job_arg}")
        print(f"events in access_events   {rows:,}")
        if lat:
            print(f"window latency (row visible − window end) over {len(lat)} windows: "
                  f"p50 {np.percentile(lat, 50):.2f} s, p95 {np.percentile(lat, 95):.2f} s, max {max(lat):.2f} s")
        if raw_age:
            print(f"raw-event latency (age of the newest access_events row, {len(raw_age)} polls): "
                  f"p50 {np.percentile(raw_age, 50):.2f} s, p95 {np.percentile(raw_age, 95):.2f} s")
        store.command(f"DROP DATABASE {database}")
        store.close()
        delete_run_topics(admin, topic)
        admin.close()
    finally:
        if job is not None and job.poll() is None:
            import os
            import signal

            os.killpg(job.pid, signal.SIGKILL)
        stop_started(kafka=started_kafka, clickhouse=started_ch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
