#!/usr/bin/env python
"""Kafka → Flink job → ClickHouse throughput with the default 24 shadow caches (3 policies × 8 sizes).

    .venv/bin/python scripts/bench_stream.py [--events 1000000] [--days 1] [--mode process|thread]
        [--cluster [--kill-taskmanager-after S]]

Preloads the events topic with batched AccessEvent messages (2,500 events each, as the shippers
write them) from the deterministic generator, then runs flink-jobs/shadow_caches.py bounded over
it into a fresh ClickHouse database. The sustained rate is taken from the job's own health rows
(events_in over wall time between its first and last writes), so JVM and Python start-up are
reported apart. Also prints peak RSS (the kernel's VmHWM): of the job's processes, sampled
while it runs (the Python driver and workers, the JVM), and of Kafka and ClickHouse. Starts
Kafka and ClickHouse with scripts/services when they are not running and stops what it started.

--cluster submits the same job with flink-jobs/submit.sh to the standalone cluster of
`scripts/services start flink --taskmanagers N` (started with N = --parallelism when it is not
running) and adds its checkpoints' count, duration and size (Flink REST). --kill-taskmanager-after
S SIGKILLs a TaskManager S seconds after the first write, starts a replacement, and reports the
recovery time (kill to the job's next write). Kill the TaskManager that runs the job: at
--parallelism 1 with two TaskManagers the first may be idle; at --parallelism N with N
TaskManagers each runs a subtask.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))


def service(name: str) -> tuple[dict[str, str], bool]:
    from services import services_env

    env = services_env(name)
    if env is not None:
        return env, False
    subprocess.run([str(REPO / "scripts/services"), "start", name], check=True)
    return services_env(name), True


def delete_run_topics(admin, topic: str) -> None:
    """Delete a run's topic and its side topics (those exist once something was late or rejected)."""
    from kafka.errors import UnknownTopicOrPartitionError

    for t in (topic, topic + ".late", topic + ".rejects"):
        try:
            admin.delete_topics([t])
        except UnknownTopicOrPartitionError:
            pass


def stop_started(**started: bool) -> None:
    """Stop the services `service` started (those already running before stay up)."""
    for name, was_started in started.items():
        if was_started:
            subprocess.run([str(REPO / "scripts/services"), "stop", name])


def _children(pid: int) -> list[int]:
    """All descendants of `pid` (every thread's children: the JVM is forked from a helper thread)."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:  # ended meanwhile
        return []
    return out + [d for c in out for d in _children(c)]


def peak_rss_mib(pid: int) -> tuple[str, float] | None:
    """(command name, peak resident set in MiB: the kernel's VmHWM) of a running process."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return fields["Name"].strip(), int(fields["VmHWM"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        return None


class PeakRss(threading.Thread):
    """Peak RSS of a process and its descendants (the JVM, Python workers), sampled every 0.5 s
    until stopped: they are gone before their parent can be asked."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peaks, self.done = pid, {}, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            for p in [self.pid, *_children(self.pid)]:
                got = peak_rss_mib(p)
                if got is not None:
                    self.peaks[p] = max(self.peaks.get(p, got), got, key=lambda x: x[1])

    def stop(self) -> str:
        self.done.set()
        self.join()
        by_name: dict[str, float] = {}
        for name, mib in self.peaks.values():
            by_name[name] = by_name.get(name, 0.0) + mib
        return ", ".join(f"{name} {mib:,.0f} MiB" for name, mib in sorted(by_name.items(), key=lambda x: -x[1]))


def parsed_accesses(events: int, days: float, sites: int = 2) -> list:
    """Generated XCache g-stream accesses, parsed as the shippers parse them (AccessEvent structs)."""
    from cachescope.config import load_config
    from ingest.pipeline import LineParser

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "gstream.log"
        subprocess.run([str(REPO / ".venv/bin/cachescope"), "generate", "--out", str(log), "-f", "xrootd-gstream",
                        "-n", str(events), "--days", str(days), "--sites", str(sites)], check=True, capture_output=True)
        return LineParser("xrootd-gstream", config=load_config(), on_reject=lambda r: None).parse_all(
            log.read_text().splitlines())


def preload(bootstrap: str, topic: str, events: int, days: float, per_message: int, repeat: int = 1) -> int:
    """Generated g-stream accesses, parsed as the shippers parse them, `repeat` times one after
    the other in event time (the same accesses a period later: new seq, shifted ts)."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    from cachescope.core.columns import EventColumns
    from cachescope.core.messages import encode_columns

    parsed = parsed_accesses(events, days)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, max_request_size=64 * 2**20,
                             batch_size=2**20, compression_type=None)
    cols = EventColumns.from_events(parsed)
    groups = sorted(set(cols.cache_group.tolist()))
    span = int(cols.ts.max() - cols.ts.min()) + 1
    sent = []
    for r in range(repeat):
        # message by message in arrival order, one group at a time per message as the shippers do
        for start in range(0, len(cols), per_message * len(groups)):
            chunk = cols.take(np.arange(start, min(start + per_message * len(groups), len(cols))))
            chunk.ts = chunk.ts + r * span
            chunk.seq = chunk.seq + np.uint64(r * len(cols))
            for g in groups:
                part = chunk.take(np.flatnonzero(chunk.cache_group == g))
                for a in range(0, len(part), per_message):
                    sub = part.take(np.arange(a, min(a + per_message, len(part))))
                    sent.append(producer.send(topic, key=g.encode(), value=encode_columns(g, sub)))
                    if len(sent) % 100 == 0:  # kafka-python's sender thread needs the GIL to keep up
                        producer.flush()
    producer.flush()
    for f in sent:
        f.get(timeout=60)  # a message the broker refused fails the benchmark, not its figures
    producer.close()
    return len(parsed) * repeat


def cluster_up(taskmanagers: int) -> dict[str, str]:
    from services import services_env

    subprocess.run([str(REPO / "scripts/services"), "start", "flink", "--taskmanagers", str(taskmanagers)], check=True)
    return services_env("flink")


def _rest(flink_env: dict[str, str], path: str):
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://{flink_env['FLINK_REST']}{path}", timeout=30) as r:
        return json.load(r)


def run_on_cluster(flink_env, job_args: list[str], ckpt: str, store, args):
    """submit.sh, then wait for the bounded job to finish; (TaskManager RSS, checkpoint figures, recovery s)."""
    import re
    import signal

    env = dict(os.environ, FLINK=str(Path(flink_env["FLINK_HOME"]) / "bin" / "flink"), PYTHON=sys.executable,
               JOB=str(REPO / "flink-jobs/shadow_caches.py"), CONNECTOR_JAR=flink_env["FLINK_CONNECTOR_JAR"],
               CHECKPOINT_DIR=ckpt, FLINK_LOG_DIR=ckpt, PYTHONPATH=str(REPO))
    job_args = [a for a in job_args if a not in ("--restart-attempts", "0")] + ["--monitor-every", "0"]
    p = subprocess.run(["bash", str(REPO / "flink-jobs/submit.sh"), flink_env["FLINK_REST"], "--", *job_args],
                       capture_output=True, text=True, env=env)
    m = re.search(r"JobID ([0-9a-f]{32})", p.stdout)
    if p.returncode != 0 or not m:
        raise SystemExit(f"bench_stream: submit.sh failed: {(p.stdout + p.stderr)[-2000:]}")
    job = m.group(1)
    tms = [int(x) for x in flink_env["FLINK_TASKMANAGER_PIDS"].split(",")]
    rss = [PeakRss(pid) for pid in tms]
    for r in rss:
        r.start()
    recovery = None

    def writes() -> int:
        return int(store.query("SELECT count() FROM pipeline_health").scalar())

    if args.kill_taskmanager_after is not None:
        while writes() == 0:
            time.sleep(0.2)
        time.sleep(args.kill_taskmanager_after)
        killed = time.time()
        os.kill(tms[0], signal.SIGKILL)
        cluster_up(len(tms))  # a replacement
        # kill to the first row of the restored attempt: a surviving subtask may write before the
        # failover cancels it, so only writes after the restore count
        restored = None
        while restored is None and _rest(flink_env, f"/jobs/{job}")["state"] not in ("FINISHED", "FAILED"):
            restored = (_rest(flink_env, f"/jobs/{job}/checkpoints").get("latest") or {}).get("restored")
            time.sleep(0.1)
        if restored is not None:
            since = restored["restore_timestamp"] / 1000
            first = None
            while first is None:
                first = store.query("SELECT toUnixTimestamp64Micro(min(ts)) / 1e6 FROM pipeline_health "
                                    "WHERE ts > fromUnixTimestamp64Micro(toInt64({t:Float64} * 1e6))",
                                    {"t": since}).scalar()
                first = first if first and first > since else None
                time.sleep(0.2)
            recovery = (first - killed, since - killed)
    while (state := _rest(flink_env, f"/jobs/{job}")["state"]) not in ("FINISHED", "FAILED", "CANCELED"):
        time.sleep(0.5)
    if state != "FINISHED":
        raise SystemExit(f"bench_stream: job {job} ended {state} (Flink REST /jobs/{job}/exceptions)")
    c = _rest(flink_env, f"/jobs/{job}/checkpoints")
    s = c["summary"]
    figures = (f"{c['counts']['completed']} completed, duration avg {s['end_to_end_duration']['avg']:,} ms "
               f"max {s['end_to_end_duration']['max']:,} ms, size avg {s['checkpointed_size']['avg'] / 2**20:,.1f} MiB "
               f"max {s['checkpointed_size']['max'] / 2**20:,.1f} MiB")
    return "; ".join(f"TaskManager {r.pid}: {r.stop()}" for r in rss), figures, recovery


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="generated accesses (reads are ~90%%)")
    ap.add_argument("--event-rate", type=float, default=100_000,
                    help="events per second of event time: a live stream at the target rate (default)")
    ap.add_argument("--days", type=float, default=None,
                    help="spread the events over this many days instead (a backlog replay: sparse windows, "
                         "many more rows per event)")
    ap.add_argument("--per-message", type=int, default=2500, help="events per message (the shippers' --batch)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="send the generated accesses this many times, each a period later (long runs, "
                         "several checkpoints, without generating more)")
    ap.add_argument("--topic", default=None, help="reuse a topic an earlier run preloaded (kept with --keep-topic)")
    ap.add_argument("--keep-topic", action="store_true")
    ap.add_argument("--job-arg", action="append", default=[], help="extra argument for the job (repeatable)")
    ap.add_argument("--mode", choices=("process", "thread"), default="process")
    ap.add_argument("--shards", type=int, default=1, help="pipeline.shards (with --parallelism)")
    ap.add_argument("--parallelism", type=int, default=1)
    ap.add_argument("--cluster", action="store_true", help="on the standalone cluster (scripts/services start flink)")
    ap.add_argument("--checkpoint-interval", default="30s")
    ap.add_argument("--kill-taskmanager-after", type=float, default=None,
                    help="with --cluster: SIGKILL a TaskManager this many seconds after the first write")
    args = ap.parse_args()

    subprocess.run([str(REPO / "scripts/services"), "install", "flink-jars"], check=True)
    kafka_env, started_kafka = service("kafka")
    ch_env, started_ch = service("clickhouse")
    try:
        from cachescope.store import ClickHouseStore, migrations

        run = uuid.uuid4().hex[:8]
        database = f"bench_{run}"
        if args.topic:
            topic = args.topic
        else:
            topic = f"bench-{run}"
            t0 = time.perf_counter()
            days = args.days if args.days is not None else args.events / args.event_rate / 86400
            n = preload(kafka_env["KAFKA_BOOTSTRAP"], topic, args.events, days, args.per_message, args.repeat)
            print(f"# preloaded {n:,} events ({args.repeat} × {days * 86400:,.0f} s of event time) into {topic} "
                  f"in {time.perf_counter() - t0:.1f} s")
        store = ClickHouseStore(ch_env["CLICKHOUSE_URL"], database=database)
        migrations.migrate(store, events_ttl_days=0)
        config = Path(tempfile.mkdtemp()) / "site.yaml"
        config.write_text(f"pipeline:\n  shards: {args.shards}\n")
        with tempfile.TemporaryDirectory() as ckpt:
            cmd = [sys.executable, str(REPO / "flink-jobs/shadow_caches.py"), "--bootstrap", kafka_env["KAFKA_BOOTSTRAP"],
                   "--topic", topic, "--consumer-group", database, "--late-topic", topic + ".late",
                   "--reject-topic", topic + ".rejects",
                   "--clickhouse", ch_env["CLICKHOUSE_URL"].rsplit("/", 1)[0] + "/" + database,
                   "--checkpoint-dir", ckpt, "--bounded", "--restart-attempts", "0", "--execution-mode", args.mode,
                   "--parallelism", str(args.parallelism), "--config", str(config), *args.job_arg]
            cmd += ["--checkpoint-interval", args.checkpoint_interval]
            t0 = time.perf_counter()
            if args.cluster:
                flink_env = cluster_up(args.parallelism)
                job_rss, checkpoints, recovery = run_on_cluster(flink_env, cmd[2:], ckpt, store, args)
            else:
                job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                rss = PeakRss(job.pid)
                rss.start()
                if job.wait() != 0:
                    raise SystemExit(f"bench_stream: the job failed (exit {job.returncode}): rerun {' '.join(cmd)}")
                job_rss, checkpoints, recovery = rss.stop(), None, None
            wall = time.perf_counter() - t0
        (first, last, events_in), = store.query(
            "SELECT min(t), max(t), sum(v) FROM (SELECT cache_group, max(ts) AS t, argMax(value, ts) AS v "
            "FROM pipeline_health WHERE metric = 'events_in' GROUP BY cache_group)").rows
        (first_write,) = store.query("SELECT min(ts) FROM pipeline_health").rows[0]
        span = (last - first_write).total_seconds()
        rows = {t: store.query(f"SELECT count() FROM {t}").scalar() for t in ("access_events", "efficiency", "mrc", "observed")}
        where = "standalone cluster (one-slot TaskManagers)" if args.cluster else "MiniCluster"
        print(f"# job: {where}, {args.mode} mode, parallelism {args.parallelism}, shards {args.shards}, 24 shadow caches "
              f"(lru, arc, s3fifo × 1–200 TB), 1-min windows, hourly 64-point LRU curve, raw events kept")
        print(f"events processed        {int(events_in):>12,}")
        print(f"job wall time           {wall:>12.1f} s (start-up included)")
        print(f"first to last write     {span:>12.1f} s")
        print(f"sustained events/s      {events_in / span:>12,.0f}")
        print(f"overall events/s        {events_in / wall:>12,.0f}")
        print("rows written            " + ", ".join(f"{t} {c:,}" for t, c in rows.items()))
        print(f"peak RSS, job           {job_rss} (summed per command name)")
        if checkpoints:
            print(f"checkpoints             {checkpoints}")
        if recovery is not None:
            print(f"recovery after TM kill  {recovery[0]:>12.1f} s (SIGKILL to the first row of the restored attempt; "
                  f"restored from its checkpoint after {recovery[1]:.1f} s)")
        servers = [(n, peak_rss_mib(int(e[k]))) for n, e, k in (("Kafka", kafka_env, "KAFKA_PID"),
                                                                 ("ClickHouse", ch_env, "CLICKHOUSE_PID")) if k in e]
        print("peak RSS, servers       " + ", ".join(f"{n} {r[1]:,.0f} MiB" for n, r in servers if r)
              + " (since each server started)")
        store.command(f"DROP DATABASE {database}")
        store.close()
        if not (args.keep_topic or args.topic):
            from kafka.admin import KafkaAdminClient

            admin = KafkaAdminClient(bootstrap_servers=kafka_env["KAFKA_BOOTSTRAP"])
            delete_run_topics(admin, topic)
            admin.close()
        elif not args.topic:
            print(f"# kept topic {topic}: rerun with --topic {topic}")
    finally:
        stop_started(kafka=started_kafka, clickhouse=started_ch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
