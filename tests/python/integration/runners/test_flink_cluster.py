"""The job on a standalone Flink cluster (scripts/services start flink: a JobManager and one-slot
TaskManagers, separate processes, configured as docker-compose.yml and the FlinkDeployment),
submitted by flink-jobs/submit.sh as the compose file does; each store compared row for row with
the processing core run directly on the same accesses. Processes are killed with SIGKILL mid-stream
and the job is rescaled through a savepoint (flink-jobs/stop_with_savepoint.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cachescope.config import load_config
from support.clusters import (REPO, Halves, completed_checkpoints, gone, job_state, services, sigkill, submit, wait,
                      wait_rows)
from support.clusters import cluster, flink_cluster  # noqa: F401 (fixtures)
from support.services import SERVICES, topic_items
from test_flink_job import assert_store_equals, database, expected, generate, row_count, ship  # noqa: F401 (fixture)

pytestmark = pytest.mark.services
sys.path.insert(0, str(REPO / "flink-jobs"))


def url(clickhouse, database) -> str:
    return f"{clickhouse.url.rsplit('/', 1)[0]}/{database.database}"


# --------------------------------------------------------------------------- tests

def test_sigkill_of_a_taskmanager_mid_stream_restarts_from_the_last_checkpoint_and_changes_nothing(
        kafka, clickhouse, database, cluster, kafka_topic, tmp_path):
    stream = Halves(tmp_path, kafka.bootstrap, kafka_topic, 16_000, seed=11)
    first = stream.first
    job = submit(cluster, tmp_path, kafka.bootstrap, url(clickhouse, database), kafka_topic, "--parallelism", "2")
    wait_rows(cluster, job, database, {"access_events": first})
    done = completed_checkpoints(cluster, job)
    wait("a checkpoint holding the first half", lambda: completed_checkpoints(cluster, job) > done)
    stream.rest()
    # both TaskManagers run a subtask (parallelism 2, one slot each): the first one dies as soon
    # as rows of the second half are written, and a replacement is started
    wait("part of the second half written", lambda: row_count(database, "access_events") > first)
    victim = cluster.taskmanager_pids()[0]
    sigkill(victim, "a TaskManager")
    print(f"killed TaskManager {victim} with {row_count(database, 'access_events')} raw events stored", flush=True)
    cluster.env = services("start", "flink", "--taskmanagers", "2")
    assert victim not in cluster.taskmanager_pids()
    assert not group_members(victim), "the killed TaskManager's Python workers outlived its replacement's start"
    events = topic_items(kafka.bootstrap, kafka_topic)
    want = expected(events, load_config().pipeline, finish=False)
    wait_rows(cluster, job, database, {t: len(df) for t, df in want.items()})
    wait("the job running again", lambda: job_state(cluster, job) == "RUNNING")
    restored = cluster.get(f"/jobs/{job}/checkpoints")["latest"]["restored"]
    assert restored and restored["id"] > done, "the job did not restart from a checkpoint"
    assert_store_equals(database, want)


def test_stop_with_savepoint_at_parallelism_1_and_resume_at_2_changes_nothing(
        kafka, clickhouse, database, cluster, kafka_topic, tmp_path):
    stream = Halves(tmp_path, kafka.bootstrap, kafka_topic, 12_000, seed=5)
    first = stream.first
    job = submit(cluster, tmp_path, kafka.bootstrap, url(clickhouse, database), kafka_topic, "--parallelism", "1")
    again = subprocess.run(["bash", str(REPO / "flink-jobs" / "submit.sh"), cluster.rest, "--"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHON=sys.executable))
    assert again.returncode == 0 and "already runs" in again.stdout, again.stdout + again.stderr
    wait_rows(cluster, job, database, {"access_events": first})
    p = subprocess.run([sys.executable, str(REPO / "flink-jobs" / "stop_with_savepoint.py"), cluster.rest,
                        (tmp_path / "savepoints").as_uri()], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    savepoint = p.stdout.strip()
    assert savepoint.startswith("file:") and (Path(savepoint.removeprefix("file:")) / "_metadata").exists()
    assert job_state(cluster, job) == "FINISHED"
    stream.rest()
    job2 = submit(cluster, tmp_path, kafka.bootstrap, url(clickhouse, database), kafka_topic, "--parallelism", "2",
                  restore=savepoint)
    assert cluster.get(f"/jobs/{job2}/plan")["plan"]["nodes"][-1]["parallelism"] in (1, 2)
    assert max(n["parallelism"] for n in cluster.get(f"/jobs/{job2}/plan")["plan"]["nodes"]) == 2
    events = topic_items(kafka.bootstrap, kafka_topic)
    want = expected(events, load_config().pipeline, finish=False)
    wait_rows(cluster, job2, database, {t: len(df) for t, df in want.items()})
    assert_store_equals(database, want)
    # nothing left to stop: one line, exit 1
    again = subprocess.run([sys.executable, str(REPO / "flink-jobs" / "stop_with_savepoint.py"), cluster.rest],
                           capture_output=True, text=True)
    assert again.returncode == 0 or (again.returncode == 1 and len(again.stderr.splitlines()) == 1)


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory):
    """Three KRaft brokers (scripts/services start kafka --brokers 3) in a var/ of their own."""
    env = dict(os.environ, CACHESCOPE_VAR_DIR=str(tmp_path_factory.mktemp("kafka3-var")))
    e = services("start", "kafka", "--brokers", "3", env=env)
    yield type("Kafka3", (), {"bootstrap": e["KAFKA_BOOTSTRAP"], "env": e})
    subprocess.run([str(SERVICES), "stop", "kafka"], capture_output=True, env=env)


def end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets-probe"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        c.close()


def partition_leader(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30).topics[topic].partitions[0].leader


def test_sigkill_of_the_partition_leader_while_shippers_produce_loses_and_doubles_nothing(
        kafka3, clickhouse, database, cluster, kafka_topic, tmp_path):
    import threading

    from ingest.pipeline import LineParser

    assert len(kafka3.bootstrap.split(",")) == 3
    lines = generate(tmp_path / "all.log", 30_000, seed=13)
    head = next(i for i in range(len(lines) // 10, len(lines)) if '"file_close"' in lines[i])
    (tmp_path / "a.log").write_text("".join(lines[:head]))
    (tmp_path / "b.log").write_text("".join(lines[head:]))
    ship(tmp_path / "a.log", kafka3.bootstrap, kafka_topic)  # creates the topics: replicated by the brokers' defaults
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": kafka3.bootstrap}).list_topics(timeout=30)
    for t in (kafka_topic, kafka_topic + ".rejects"):
        assert len(meta.topics[t].partitions[0].replicas) == 3, f"{t} is not replicated"
    job = submit(cluster, tmp_path, kafka3.bootstrap, url(clickhouse, database), kafka_topic, "--parallelism", "1")
    shipped: list[BaseException | None] = []
    # a second shipper (its own transactional id) writes the rest while the leader dies
    sh = threading.Thread(target=_ship_to, args=(tmp_path / "b.log", kafka3.bootstrap, kafka_topic, shipped))
    sh.start()
    leader = partition_leader(kafka3.bootstrap, kafka_topic)
    first = end_offset(kafka3.bootstrap, kafka_topic)
    wait("the second shipper's first transaction", lambda: end_offset(kafka3.bootstrap, kafka_topic) > first, 0.02)
    pid = int(kafka3.env["KAFKA_PIDS"].split(",")[leader - 1])
    os.kill(pid, signal.SIGKILL)  # no waiting for its exit: the second shipper is mid-transaction
    print(f"killed broker {leader} (pid {pid}), the leader of {kafka_topic}, while the second shipper produced "
          f"({row_count(database, 'access_events')} raw events stored)", flush=True)
    assert sh.is_alive() or not shipped, "the second shipper finished before the leader died"
    sh.join()
    assert shipped == [None], f"the shipper failed when the leader died: {shipped}"
    wait("another leader", lambda: partition_leader(kafka3.bootstrap, kafka_topic) not in (leader, -1))
    # end to end from the log files: every parsed event once in Kafka, once in the store
    parsed = LineParser("xrootd-gstream", config=load_config(), on_reject=lambda r: None).parse_all(lines)
    events = [e for e in topic_items(kafka3.bootstrap, kafka_topic) if "file_id" in e]
    assert len(events) == len(parsed)
    ids = {(e["cache_group"], e["ts"], e["origin"], e["seq"]) for e in events}
    assert len(ids) == len(events), "an event was written twice into Kafka"
    want = expected(events, load_config().pipeline, finish=False)
    wait_rows(cluster, job, database, {t: len(df) for t, df in want.items()})
    assert_store_equals(database, want)


def _ship_to(log: Path, bootstrap: str, topic: str, result: list) -> None:
    from ingest.shipper import Shipper

    try:
        # small transactions: the shipper is mid-stream for seconds
        sh = Shipper("xrootd-gstream", str(log), f"kafka://{bootstrap}/{topic}", config=load_config(),
                     shipper_id=topic + "-b", batch_events=100)
        try:
            sh.run()
        finally:
            sh.close()
    except BaseException as e:  # the test reports it
        result.append(e)
    else:
        result.append(None)


def test_sigkill_of_the_jobmanager_and_resubmission_from_the_newest_retained_checkpoint_changes_nothing(
        kafka, clickhouse, database, cluster, kafka_topic, tmp_path):
    """No HA here (the Kubernetes deployment has it): the JobManager is started again by
    scripts/services, the TaskManagers that outlived it re-register, and submit.sh resumes the job
    from the newest checkpoint under CHECKPOINT_DIR, as compose's flink-submit does on restart."""
    stream = Halves(tmp_path, kafka.bootstrap, kafka_topic, 12_000, seed=17)
    first = stream.first
    job = submit(cluster, tmp_path, kafka.bootstrap, url(clickhouse, database), kafka_topic, "--parallelism", "1")
    wait_rows(cluster, job, database, {"access_events": first})
    done = completed_checkpoints(cluster, job)
    wait("a checkpoint holding the first half", lambda: completed_checkpoints(cluster, job) > done)
    stream.rest()
    jm = int(cluster.env["FLINK_JOBMANAGER_PID"])
    sigkill(jm, "the JobManager")
    print(f"killed JobManager {jm} with {row_count(database, 'access_events')} raw events stored", flush=True)
    cluster.env = services("start", "flink", "--taskmanagers", "2")
    assert int(cluster.env["FLINK_JOBMANAGER_PID"]) != jm
    newest = max((tmp_path / "checkpoints").glob("*/chk-*/_metadata"), key=lambda m: m.stat().st_mtime).parent
    job2 = submit(cluster, tmp_path, kafka.bootstrap, url(clickhouse, database), kafka_topic, "--parallelism", "1")
    restored = None

    def restored_from_checkpoint() -> bool:
        nonlocal restored
        restored = (cluster.get(f"/jobs/{job2}/checkpoints").get("latest") or {}).get("restored")
        return restored is not None or job_state(cluster, job2) == "RUNNING" and completed_checkpoints(cluster, job2) > 0

    wait("the resubmitted job running", restored_from_checkpoint)
    events = topic_items(kafka.bootstrap, kafka_topic)
    want = expected(events, load_config().pipeline, finish=False)
    wait_rows(cluster, job2, database, {t: len(df) for t, df in want.items()})
    restored = cluster.get(f"/jobs/{job2}/checkpoints")["latest"]["restored"]
    assert restored and Path(restored["external_path"].removeprefix("file:")) == newest
    assert_store_equals(database, want)


def group_members(pgid: int) -> set[int]:
    """The processes of a process group (each TaskManager leads its own: scripts/services)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out


def test_stop_ends_the_python_workers_of_a_sigkilled_taskmanager(
        kafka, clickhouse, database, cluster, kafka_topic, tmp_path):
    log = tmp_path / "gstream.log"
    generate(log, 3000, seed=29)
    ship(log, kafka.bootstrap, kafka_topic)
    n = len(topic_items(kafka.bootstrap, kafka_topic))
    job = submit(cluster, tmp_path, kafka.bootstrap, url(clickhouse, database), kafka_topic, "--parallelism", "2")
    wait_rows(cluster, job, database, {"access_events": n})
    tms = cluster.taskmanager_pids()
    workers = {tm: group_members(tm) - {tm} for tm in tms}
    assert all(workers.values()), f"a TaskManager without Python workers in its process group: {workers}"
    victim = tms[0]
    sigkill(victim, "a TaskManager")
    print(f"Python workers of the killed TaskManager still running: {sorted(p for p in workers[victim] if not gone(p))}",
          flush=True)
    p = subprocess.run([str(SERVICES), "stop", "flink"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    left = [p for ws in workers.values() for p in ws if not gone(p)] + [p for tm in tms for p in group_members(tm)]
    assert not left, f"processes of the TaskManagers left after scripts/services stop flink: {left}"
    cluster.env = services("start", "flink", "--taskmanagers", "2")  # for the tests that follow
    cluster.rest = cluster.env["FLINK_REST"]
