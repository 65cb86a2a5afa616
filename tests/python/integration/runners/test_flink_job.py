"""The PyFlink job end to end on the real servers: generated logs → shipper → Kafka → Flink
(MiniCluster, process mode) → ClickHouse, compared row for row with the processing core run
directly on the same events; and a SIGKILL mid-stream with a restart from the last checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachescope.config import load_config
from cachescope.core import EventColumns
from cachescope.core.group_state import GroupState
from cachescope.core.shards import split
from cachescope.events import OP_NAMES
from cachescope.store import ClickHouseStore, migrations
from ingest.shipper import Shipper
from support.services import topic_items, unique_name
from test_alerts import _Receiver

pytestmark = pytest.mark.services
REPO = Path(__file__).resolve().parents[4]
JOB = REPO / "flink-jobs" / "shadow_caches.py"
KEYS = {
    "efficiency": ["cache_group", "policy", "size_bytes", "tier", "window_start", "shard", "run"],
    "mrc": ["cache_group", "tier", "window_start", "capacity_bytes", "shard", "run"],
    "observed": ["cache_group", "window_start", "server", "tier", "shard", "run"],
    "access_events": ["cache_group", "ts", "origin", "seq"],
    "efficiency_hourly": ["cache_group", "policy", "size_bytes", "tier", "window_start", "shard", "run"],
    "efficiency_daily": ["cache_group", "policy", "size_bytes", "tier", "window_start", "shard", "run"],
    "alerts": ["cache_group", "rule", "starts_at", "state", "shard"],
}


# --------------------------------------------------------------------------- helpers

def generate(path: Path, events: int, seed: int = 7) -> list[str]:
    subprocess.run([str(Path(sys.executable).parent / "cachescope"), "generate", "--out", str(path),
                    "-f", "xrootd-gstream", "-n", str(events), "--days", "0.25", "--seed", str(seed)],
                   check=True, capture_output=True)
    return path.read_text().splitlines(keepends=True)


def ship(log: Path, bootstrap: str, topic: str) -> None:
    sh = Shipper("xrootd-gstream", str(log), f"kafka://{bootstrap}/{topic}", config=load_config(),
                 shipper_id=topic, batch_events=500)
    try:
        sh.run()
    finally:
        sh.close()


def start_job(tmp: Path, kafka, clickhouse, topic: str, database: str, *extra: str) -> subprocess.Popen:
    log = open(tmp / f"job-{time.monotonic_ns()}.log", "w")
    # its own session: SIGKILL reaches the JVM (MiniCluster) and the Python workers with it
    return subprocess.Popen(
        [sys.executable, str(JOB), "--bootstrap", kafka.bootstrap, "--topic", topic,
         "--late-topic", topic + ".late", "--reject-topic", topic + ".job-rejects",
         "--consumer-group", topic, "--clickhouse", f"{clickhouse.url.rsplit('/', 1)[0]}/{database}",
         "--checkpoint-dir", str(tmp / "checkpoints"), "--restart-attempts", "0", "--flush-seconds", "0.5", *extra],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)


def kill(job: subprocess.Popen) -> None:
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait()


def job_log(tmp: Path) -> str:
    return "\n".join(p.read_text()[-4000:] for p in sorted(tmp.glob("job-*.log")))


def wait_for(what: str, cond, job: subprocess.Popen, tmp: Path) -> None:
    """Poll until cond() holds, without a time limit (a loaded machine is slow, not wrong): a job that
    died fails with the job's log; what it waits for is said every 30 s (a hang shows in the log)."""
    t0 = said = time.monotonic()
    while not cond():
        if job.poll() is not None:
            pytest.fail(f"job exited with {job.returncode} while waiting for {what}:\n{job_log(tmp)}")
        if time.monotonic() - said > 30:
            said = time.monotonic()
            print(f"still waiting for {what} ({said - t0:.0f} s)", flush=True)
        time.sleep(0.2)


def expected(events: list[dict], config, finish: bool) -> dict[str, pd.DataFrame]:
    """What the core computes directly: each cache group's (or shard's) events in Kafka order."""
    cols = EventColumns.from_events(events)
    out: dict[str, list] = {}
    for group in sorted(set(cols.cache_group)):
        for k, part in split(cols.take(np.flatnonzero(cols.cache_group == group)), config.shards):
            st = GroupState.new(group, config, k)
            st.process(part)
            if finish:
                st.finish()
            for own in (st, *st.servers.values()):  # the group's rows, and its per-server caches'
                for table, columns in own.outbox.drain().items():
                    out.setdefault(table, []).append(pd.DataFrame(columns))
    return {t: normalise(t, pd.concat(parts, ignore_index=True)) for t, parts in out.items()}


def normalise(table: str, df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c in df.columns:
        if c == "op":  # the core keeps op codes; the store reads its Enum8 back by name
            df[c] = df[c].map(lambda v: OP_NAMES[v] if isinstance(v, (int, np.integer)) else v).astype(object)
        elif c.startswith("observed_"):  # Nullable(UInt64): None where no real cache reported
            df[c] = df[c].map(lambda v: -1 if v is None or v != v else int(v)).astype("int64")
        elif c == "op":  # Enum8: the core has its code, the server answers its name
            df[c] = df[c].map(lambda v: {"read": 0, "write": 1, "delete": 2}.get(v, v)).astype("int64")
        elif c in ("ts", "window_start", "window_end", "starts_at"):
            df[c] = pd.to_datetime(df[c], utc=True).dt.as_unit("us").astype("int64")
        elif df[c].dtype.kind in "uif":
            df[c] = df[c].astype("float64" if df[c].dtype.kind == "f" else "int64")
        else:
            df[c] = df[c].map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else v).astype(object)
    return df.sort_values(KEYS[table]).reset_index(drop=True)


def stored(store: ClickHouseStore, table: str, columns: list[str]) -> pd.DataFrame:
    rows = store.query(f"SELECT {', '.join(columns)} FROM {table} FINAL")
    return normalise(table, pd.DataFrame(list(rows), columns=columns))


def assert_store_equals(store: ClickHouseStore, want: dict[str, pd.DataFrame]) -> None:
    for table, df in want.items():
        got = stored(store, table, list(df.columns))
        assert len(got) == len(df), f"{table}: {len(got)} rows stored, the core made {len(df)}"
        pd.testing.assert_frame_equal(got, df, check_dtype=False, obj=table)


def row_count(store: ClickHouseStore, table: str) -> int:
    return int(store.query(f"SELECT count() FROM {table} FINAL").scalar())


@pytest.fixture
def database(clickhouse, flink_jars, request):
    name = unique_name(request, "flink")
    store = ClickHouseStore(clickhouse.url, database=name)
    migrations.migrate(store, events_ttl_days=0)  # generated logs are from 2024: keep them
    yield store
    store.command(f"DROP DATABASE IF EXISTS {name}")
    store.close()


# --------------------------------------------------------------------------- tests

def test_job_writes_what_the_core_computes_with_a_group_spread_over_two_shards(kafka, clickhouse, database,
                                                                               kafka_topic, tmp_path):
    log = tmp_path / "gstream.log"
    generate(log, 12_000)
    ship(log, kafka.bootstrap, kafka_topic)
    from kafka import KafkaProducer

    with KafkaProducer(bootstrap_servers=kafka.bootstrap) as p:  # a message no shipper would write
        p.send(kafka_topic, b'{"cache_group": "x", "events": 7}').get(timeout=30)
    events = [e for e in topic_items(kafka.bootstrap, kafka_topic) if "file_id" in e]
    assert len(events) > 5000
    cfg = tmp_path / "site.yaml"
    # alert rules the stream surely trips (and the default ones): the job evaluates them as the core does
    receiver = _Receiver(fail=1)  # the job posts its alerts (Alertmanager JSON), retrying after a 503
    cfg.write_text("pipeline:\n  shards: 2\nalerts:\n  rules:\n"
                   "    - {name: low, kind: below, threshold: 0.5, over: 10m, for: 5m, warmup: 0s, min_requests: 1}\n"
                   f"  webhook: {{url: '{receiver.url}', retries: 3, timeout_s: 2}}\n")
    job = start_job(tmp_path, kafka, clickhouse, kafka_topic, database.database, "--bounded",
                    "--parallelism", "2", "--config", str(cfg))
    try:
        assert job.wait() == 0, job_log(tmp_path)  # a bounded job: its exit is the event
    finally:
        kill(job)
    want = expected(events, load_config(cfg).pipeline, finish=True)
    assert set(want) == {"access_events", "efficiency", "efficiency_hourly", "efficiency_daily", "mrc", "observed",
                         "alerts"}
    assert "firing" in set(want["alerts"]["state"])
    assert set(want["efficiency"]["shard"]) == {0, 1}
    assert_store_equals(database, {"alerts": want["alerts"]})  # evaluated in the job as in the core
    receiver.close()
    posted = sorted((a["labels"]["alertname"], a["startsAt"], "endsAt" in a) for a in receiver.received)
    stored = want["alerts"]
    assert len(posted) == len(stored) and {p[0] for p in posted} == set(stored["rule"])
    assert sum(p[2] for p in posted) == int((stored["state"] == "resolved").sum())
    assert_store_equals(database, want)
    rejects = topic_items(kafka.bootstrap, kafka_topic + ".job-rejects")
    assert len(rejects) == 1 and "bad message" in rejects[0]["reason"]
    health = dict(database.query("SELECT metric, max(value) FROM pipeline_health GROUP BY metric"))
    assert health["late_events"] == 0 and health["rows_written"] > 0


def test_sigkill_mid_stream_and_restore_from_checkpoint_changes_nothing(kafka, clickhouse, database,
                                                                         kafka_topic, tmp_path):
    lines = generate(tmp_path / "all.log", 16_000, seed=11)
    head = next(i for i in range(len(lines) // 2, len(lines)) if '"file_close"' in lines[i])
    log = tmp_path / "gstream.log"
    log.write_text("".join(lines[:head]))
    ship(log, kafka.bootstrap, kafka_topic)
    first = len(topic_items(kafka.bootstrap, kafka_topic))
    ckpt = tmp_path / "checkpoints"

    def checkpoints(after: float = 0.0) -> list[Path]:
        done = [m.parent for m in ckpt.glob("*/chk-*/_metadata") if m.stat().st_mtime > after]
        return sorted(done, key=lambda p: p.stat().st_mtime)

    # the default caches and an xcache whose fetches take time (the g-stream's durations, else the
    # origin rate): its fetches in flight are checkpointed state, its delayed hits columns of the rows
    site = tmp_path / "site.yaml"
    site.write_text("pipeline:\n  shadow:\n    policies: [lru, arc, s3fifo, xcache]\n"
                    "    params: {xcache: {origin_rate: 1.0e+7}}\n")
    timed = ("--config", str(site))
    job = start_job(tmp_path, kafka, clickhouse, kafka_topic, database.database, "--checkpoint-interval", "20s",
                    *timed)
    try:
        wait_for("first half written", lambda: row_count(database, "access_events") == first, job, tmp_path)
        t = time.time()
        wait_for("a checkpoint holding the first half", lambda: checkpoints(after=t), job, tmp_path)
        # the second half arrives; the job dies as soon as it has written some of it, before the
        # next checkpoint: the restart replays those messages and writes their rows again
        with log.open("a") as f:
            f.write("".join(lines[head:]))
        ship(log, kafka.bootstrap, kafka_topic)
        wait_for("part of the second half written", lambda: row_count(database, "access_events") > first,
                 job, tmp_path)
    finally:
        kill(job)
    events = topic_items(kafka.bootstrap, kafka_topic)
    assert row_count(database, "access_events") < len(events) or not checkpoints(after=t)[1:], \
        "the job finished the stream before the kill: nothing was replayed"
    last = checkpoints()[-1]
    job = start_job(tmp_path, kafka, clickhouse, kafka_topic, database.database, "--restore", str(last), *timed)
    try:
        want = expected(events, load_config(site).pipeline, finish=False)  # unbounded: open windows stay open
        counts = {t: len(df) for t, df in want.items()}
        wait_for("every row of the stream", lambda: all(row_count(database, t) >= n for t, n in counts.items()),
                 job, tmp_path)
    finally:
        kill(job)
    assert want["efficiency"]["delayed_hits"].sum() > 0 and want["efficiency"]["bytes_delayed"].sum() > 0
    assert_store_equals(database, want)


def test_messages_are_keyed_by_their_kafka_key_or_their_head_and_a_wrong_key_is_rejected(
        kafka, clickhouse, database, kafka_topic, tmp_path):
    """One shard per group: the job keys messages in the JVM by their Kafka key (what the shippers
    write); an unkeyed message is keyed by the cache group it names; a message whose key is not
    its cache group goes to the reject topic with the reason, and nothing else changes."""
    import msgspec
    from kafka import KafkaProducer

    from cachescope.core.messages import encode_batch
    from ingest.pipeline import LineParser

    log = tmp_path / "gstream.log"
    generate(log, 6_000)
    ship(log, kafka.bootstrap, kafka_topic)
    shipped = topic_items(kafka.bootstrap, kafka_topic)
    extra = LineParser("xrootd-gstream", config=load_config(), on_reject=lambda r: None).parse_all(
        generate(tmp_path / "extra.log", 400, seed=3))
    unkeyed = [msgspec.structs.replace(e, cache_group="solo", seq=i) for i, e in enumerate(extra[:150])]
    wrong = [msgspec.structs.replace(e, cache_group="solo-2", seq=i) for i, e in enumerate(extra[150:300])]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap) as p:
        p.send(kafka_topic, encode_batch("solo", unkeyed)).get(timeout=30)
        p.send(kafka_topic, key=b"someone-else", value=encode_batch("solo-2", wrong)).get(timeout=30)
        p.send(kafka_topic, key=b"x", value=b'{"cache_group": "x", "columns": 7}').get(timeout=30)
    job = start_job(tmp_path, kafka, clickhouse, kafka_topic, database.database, "--bounded")
    try:
        assert job.wait() == 0, job_log(tmp_path)  # a bounded job: its exit is the event
    finally:
        kill(job)
    as_dicts = [{f: getattr(e, f) for f in e.__struct_fields__} for e in unkeyed]
    want = expected(shipped + as_dicts, load_config().pipeline, finish=True)
    assert "solo" in set(want["efficiency"]["cache_group"])
    assert_store_equals(database, want)
    rejects = {r["cache_group"]: r["reason"] for r in topic_items(kafka.bootstrap, kafka_topic + ".job-rejects")}
    assert set(rejects) == {"someone-else", "x"}
    assert "carries the Kafka key 'someone-else'" in rejects["someone-else"]
    assert "bad message" in rejects["x"]
    # parse health where dashboard 7 reads it: the job's rejects, and (from the pipeline monitor
    # thread of the job's driver) the shipper's per-transaction counts and the group's Kafka lag
    import datetime as dt

    from cachescope import reads

    far = (dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc))
    health = reads.parse_health(database, *far, 86400)
    flink = health[(health.component == "flink") & (health.metric == "rejected")]
    assert set(flink.cache_group) == {"someone-else", "x"} and flink.value.sum() == 2
    shipper = health[(health.component == "shipper") & (health.cache_group == kafka_topic)]
    counts = shipper.groupby("metric")["value"].sum()
    assert counts["lines"] == len(log.read_text().splitlines()) and counts["events"] == len(shipped)
    lag = reads.consumer_lag(database, *far, 60, consumer_groups=[kafka_topic])
    assert set(lag["topic"]) == {kafka_topic} and len(lag) >= 1


class PrivateClickHouse:
    """A ClickHouse server of scripts/services of its own (another var/ directory), which a test
    may SIGKILL and start again on the same data directory and ports without touching the
    session's server."""

    def __init__(self, var: Path):
        from support.services import SERVICES, services_env

        self.services, self.services_env = SERVICES, services_env
        self.env = {**os.environ, "CACHESCOPE_VAR_DIR": str(var)}
        self.start()
        self.tcp_port, self.http_port = int(self.info["CLICKHOUSE_TCP_PORT"]), int(self.info["CLICKHOUSE_HTTP_PORT"])
        self.url = self.info["CLICKHOUSE_URL"]

    def _services(self, *args: str) -> None:
        p = subprocess.run([str(self.services), *args], capture_output=True, text=True, env=self.env)
        assert p.returncode == 0, f"scripts/services {' '.join(args)}:\n{p.stdout}\n{p.stderr}"

    def start(self) -> None:
        self._services("start", "clickhouse")  # after a kill: the ports of its stale env file
        self.info = self.services_env("clickhouse", self.env)
        self.pid = int(self.info["CLICKHOUSE_PID"])

    def kill(self) -> None:
        """SIGKILL by PID (no clean shutdown: parts being written are left as they are)."""
        os.kill(self.pid, signal.SIGKILL)
        while os.path.exists(f"/proc/{self.pid}") and open(f"/proc/{self.pid}/stat").read().split()[2] != "Z":
            time.sleep(0.05)

    def stop(self) -> None:
        self._services("stop", "clickhouse")


def minute_and_hour_disagree(store: ClickHouseStore) -> list:
    """(cache group, policy, size, tier, hour) whose minute windows do not sum to the hour's row."""
    counters = "sum(requests), sum(hits), sum(bytes_requested), sum(bytes_hit)"
    keys = "cache_group, policy, size_bytes, tier"

    def by_hour(table: str, start: str) -> dict:
        return {tuple(r[:5]): tuple(int(x) for x in r[5:]) for r in store.query(
            f"SELECT {keys}, {start} AS h, {counters} FROM {table} FINAL GROUP BY {keys}, h")}

    minute = by_hour("efficiency", "toStartOfHour(window_start)")
    hour = by_hour("efficiency_hourly", "window_start")
    return sorted(k for k in set(minute) | set(hour) if minute.get(k) != hour.get(k))


def test_bounded_job_that_rides_out_a_clickhouse_crash_writes_every_window(kafka, flink_jars, kafka_topic,
                                                                            tmp_path):
    """issue 28 (1): the ClickHouse server is SIGKILLed mid-stream and started again on the same data
    and ports while a bounded job runs; the job restarts from its checkpoints, and when it exits 0
    every table holds exactly what the core computes (the end-of-input windows of every group too),
    and minute and hour tables agree."""
    log = tmp_path / "gstream.log"
    subprocess.run([str(Path(sys.executable).parent / "cachescope"), "generate", "--out", str(log),
                    "-f", "xrootd-gstream", "-n", "60000", "--days", "1", "--sites", "2", "--seed", "5"],
                   check=True, capture_output=True)
    ship(log, kafka.bootstrap, kafka_topic)
    events = [e for e in topic_items(kafka.bootstrap, kafka_topic) if "file_id" in e]
    server = PrivateClickHouse(tmp_path / "var")
    try:
        store = ClickHouseStore(server.url, database="crash")
        migrations.migrate(store, events_ttl_days=0)
        job = start_job(tmp_path, kafka, server, kafka_topic, "crash", "--bounded", "--restart-attempts", "20",
                        "--checkpoint-interval", "5s")
        try:
            # mid-stream: some of the events stored, the rest still to come
            wait_for("a tenth of the events stored", lambda: row_count(store, "access_events") >= len(events) // 10,
                     job, tmp_path)
            server.kill()
            store.close()
            killed = time.monotonic()
            # the outage: the job fails a write (and restarts from its checkpoint) while the server is down
            wait_for("the job to fail a write", lambda: any("writing rows to the store failed" in p.read_text()
                                                                for p in tmp_path.glob("job-*.log")),
                     job, tmp_path)
            time.sleep(max(0.0, 15 - (time.monotonic() - killed)))  # down 15 s at least, as in the issue
            server.start()
            assert (int(server.info["CLICKHOUSE_TCP_PORT"]), int(server.info["CLICKHOUSE_HTTP_PORT"])) == \
                (server.tcp_port, server.http_port)
            store = ClickHouseStore(server.url, database="crash")
            assert job.wait() == 0, job_log(tmp_path)
        finally:
            kill(job)
        want = expected(events, load_config().pipeline, finish=True)
        assert len({g for g in want["efficiency_daily"]["cache_group"] if "/" not in g}) == 2  # and per-server caches
        assert_store_equals(store, want)
        assert minute_and_hour_disagree(store) == []
        store.close()
    finally:
        server.stop()


def test_bounded_job_that_cannot_write_its_rows_exits_1_with_one_line(kafka, flink_jars, kafka_topic, tmp_path):
    """The job never exits 0 with rows not written: when the store stays down past its restarts,
    it ends with exit 1 and one line naming the cause, not a Java stack."""
    log = tmp_path / "gstream.log"
    generate(log, 12_000)
    ship(log, kafka.bootstrap, kafka_topic)
    server = PrivateClickHouse(tmp_path / "var")
    try:
        store = ClickHouseStore(server.url, database="down")
        migrations.migrate(store, events_ttl_days=0)
        # a store down for good: the writer's 5 min of retries (the default) shortened, the verdict the same
        job = start_job(tmp_path, kafka, server, kafka_topic, "down", "--bounded", "--restart-attempts", "1",
                        "--monitor-every", "0", "--write-retry-seconds", "5")
        try:
            wait_for("some events stored", lambda: row_count(store, "access_events") > 0, job, tmp_path)
            store.close()
            server.kill()
            code = job.wait()
        finally:
            kill(job)
        out = job_log(tmp_path)
        assert code == 1, out
        last = out.strip().splitlines()[-1]
        assert last.startswith("shadow_caches: the job failed (") and "run it again" in last, out
        assert "127.0.0.1" in last or "store" in last, last  # the cause: the store's failure
    finally:
        server.stop()


def test_the_jobs_decoding_reads_what_the_shipper_sends():
    """runners.flink.read_message (the job's decoding, through the message's one definition) on
    the shipper's own records: each message's events, keyed by their cache group; a wrong key or a
    damaged message is a reject record naming why, never an exception."""
    import msgspec
    import orjson

    from ingest.pipeline import LineParser
    from ingest.shipper import _payload
    from runners.flink import read_message

    sample = Path("/work/shared/samples/xrootd_gstream_pfc_file_close.jsonl")
    lines = sample.read_text().splitlines() if sample.exists() else []
    lines += generate_lines(3_000)
    events = LineParser("xrootd-gstream", config=load_config(), on_reject=lambda r: None).parse_all(lines)
    events = [msgspec.structs.replace(e, cache_group=("A", "B", 'we"ird')[i % 3]) for i, e in enumerate(events)]
    records = list(_payload("events", "dead", "shipper-1", "xrootd-gstream", events, []))
    assert {key for _, key, _ in records} == {b"A", b"B", b'we"ird'}
    for group in ("A", "B", 'we"ird'):
        got = [read_message(key.decode(), value) for _, key, value in records if key == group.encode()]
        assert all(rejected is None for _, rejected in got)
        cols = EventColumns.concat([c for c, _ in got])
        want = EventColumns.from_events([e for e in events if e.cache_group == group])
        for name, column in want.columns().items():
            assert getattr(cols, name).tolist() == column.tolist(), name
    _, key, value = records[0]
    cols, rejected = read_message("someone-else", value)
    assert cols is None and "carries the Kafka key 'someone-else'" in orjson.loads(rejected)["reason"]
    cols, rejected = read_message(key.decode(), value[: len(value) // 2])
    assert cols is None and orjson.loads(rejected)["reason"].startswith("bad message")


def generate_lines(events: int) -> list[str]:
    from ingest.generate import make_workload, render

    return [line for _, _, _, line in render("xrootd-gstream", make_workload(events, days=1, sites=1, servers=2,
                                                                                 seed=5))]
