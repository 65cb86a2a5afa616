"""The job on a standalone Flink cluster (scripts/services start flink: a JobManager and one-slot
TaskManagers, separate processes, configured as docker-compose.yml and the FlinkDeployment),
submitted by flink-jobs/submit.sh as the compose file does; each store compared row for row with
the processing core run directly on the same accesses. Processes are killed with SIGKILL mid-stream
and the job is rescaled through a savepoint (flink-jobs/stop_with_savepoint.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cachescope.config import load_config
from services import SERVICES, services_env, topic_items
from test_flink_job import assert_store_equals, database, expected, generate, row_count, ship  # noqa: F401 (fixture)

pytestmark = pytest.mark.services
REPO = Path(__file__).resolve().parents[2]
NAME = "cachescope shadow caches"
sys.path.insert(0, str(REPO / "flink-jobs"))
from stop_with_savepoint import stop_with_savepoint  # noqa: E402


class Cluster:
    def __init__(self, env: dict[str, str]):
        self.env = env
        self.rest = env["FLINK_REST"]

    def get(self, path: str):
        with urllib.request.urlopen(f"http://{self.rest}{path}", timeout=30) as r:
            return json.load(r)

    def jobs(self, states=("RUNNING", "CREATED", "RESTARTING", "INITIALIZING")) -> list[dict]:
        return [j for j in self.get("/jobs/overview")["jobs"] if j["name"] == NAME and j["state"] in states]

    def cancel_all(self) -> None:
        for j in self.jobs():
            req = urllib.request.Request(f"http://{self.rest}/jobs/{j['jid']}?mode=cancel", method="PATCH")
            urllib.request.urlopen(req, timeout=30).read()
        wait("no job of ours running", lambda: not self.jobs())

    def taskmanager_pids(self) -> list[int]:
        return [int(p) for p in self.env["FLINK_TASKMANAGER_PIDS"].split(",") if p]


def services(*args: str) -> dict[str, str]:
    p = subprocess.run([str(SERVICES), *args], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"scripts/services {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}", pytrace=False)
    return services_env("flink")


def wait(what: str, cond, every: float = 0.5) -> None:
    """Until cond() holds, saying what it waits for every 30 s (no time limit: a stuck run shows in the log)."""
    t0 = last = time.monotonic()
    while not cond():
        if time.monotonic() - last > 30:
            last = time.monotonic()
            print(f"still waiting for {what} ({last - t0:.0f} s)", flush=True)
        time.sleep(every)


@pytest.fixture(scope="session")
def flink_cluster(flink_jars):
    env = services_env("flink")
    started = env is None
    cluster = Cluster(services("start", "flink", "--taskmanagers", "2"))
    yield cluster
    if started:
        subprocess.run([str(SERVICES), "stop", "flink"], check=True, capture_output=True)


@pytest.fixture
def cluster(flink_cluster):
    flink_cluster.env = services("start", "flink", "--taskmanagers", "2")  # replaces any a test killed
    flink_cluster.cancel_all()
    yield flink_cluster
    flink_cluster.cancel_all()


def submit(cluster: Cluster, tmp: Path, kafka, clickhouse, topic: str, database: str, *extra: str,
           restore: str | None = None) -> str:
    """flink-jobs/submit.sh with the paths outside the image; the new job's id."""
    env = dict(os.environ, FLINK=str(Path(cluster.env["FLINK_HOME"]) / "bin" / "flink"), PYTHON=sys.executable,
               JOB=str(REPO / "flink-jobs" / "shadow_caches.py"), CONNECTOR_JAR=cluster.env["FLINK_CONNECTOR_JAR"],
               CHECKPOINT_DIR=str(tmp / "checkpoints"), FLINK_LOG_DIR=str(tmp / "client-log"),
               PYTHONPATH=str(REPO))
    env.pop("RESTORE", None)
    if restore:
        env["RESTORE"] = restore
    p = subprocess.run(
        ["bash", str(REPO / "flink-jobs" / "submit.sh"), cluster.rest, "--",
         "--bootstrap", kafka.bootstrap, "--topic", topic, "--late-topic", topic + ".late",
         "--reject-topic", topic + ".job-rejects", "--consumer-group", topic,
         "--clickhouse", f"{clickhouse.url.rsplit('/', 1)[0]}/{database}",
         "--checkpoint-dir", (tmp / "checkpoints").as_uri(), "--checkpoint-interval", "3s",
         "--flush-seconds", "0.5", "--monitor-every", "0", *extra],
        capture_output=True, text=True, env=env, cwd=tmp)
    print(p.stdout[-3000:], p.stderr[-3000:], flush=True)
    assert p.returncode == 0, f"submit.sh failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    m = re.search(r"JobID ([0-9a-f]{32})", p.stdout)
    assert m, f"submit.sh printed no job id:\n{p.stdout[-4000:]}"
    return m.group(1)


def job_state(cluster: Cluster, job: str) -> str:
    return cluster.get(f"/jobs/{job}")["state"]


def wait_rows(cluster: Cluster, job: str, store, counts: dict[str, int]) -> None:
    def done() -> bool:
        state = job_state(cluster, job)
        if state in ("FAILED", "CANCELED", "FINISHED"):
            exc = cluster.get(f"/jobs/{job}/exceptions").get("root-exception") or ""
            pytest.fail(f"job {job} is {state} while waiting for its rows:\n{exc[:4000]}")
        return all(row_count(store, t) >= n for t, n in counts.items())

    wait(f"every row of the stream from job {job}", done)


def completed_checkpoints(cluster: Cluster, job: str) -> int:
    return int(cluster.get(f"/jobs/{job}/checkpoints")["counts"]["completed"])


# --------------------------------------------------------------------------- tests

def test_submit_sh_runs_the_job_on_the_cluster_and_the_store_is_what_the_core_computes(
        cluster, kafka, clickhouse, database, kafka_topic, tmp_path):
    log = tmp_path / "gstream.log"
    generate(log, 8_000)
    ship(log, kafka.bootstrap, kafka_topic)
    events = topic_items(kafka.bootstrap, kafka_topic)
    job = submit(cluster, tmp_path, kafka, clickhouse, kafka_topic, database.database, "--parallelism", "2")
    again = subprocess.run(["bash", str(REPO / "flink-jobs" / "submit.sh"), cluster.rest, "--"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHON=sys.executable))
    assert again.returncode == 0 and "already runs" in again.stdout, again.stdout + again.stderr
    want = expected(events, load_config().pipeline, finish=False)
    wait_rows(cluster, job, database, {t: len(df) for t, df in want.items()})
    assert job_state(cluster, job) == "RUNNING"
    assert_store_equals(database, want)
