"""Shared set-up of the cluster tests (test_flink_cluster.py, test_clickhouse_shards.py,
test_store_outage.py, test_add_shadow_cache.py): the standalone Flink cluster of scripts/services
and its REST API, the job submitted by flink-jobs/submit.sh, two ClickHouse shards, waiting
without a time limit, and SIGKILL of a process. Fixtures are imported by the tests that use them.
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

from support.services import SERVICES, services_env, topic_items
from test_flink_job import generate, row_count, ship

REPO = Path(__file__).resolve().parents[3]
NAME = "cachescope shadow caches"  # the job's default name (--job-name)
ACTIVE = ("RUNNING", "CREATED", "RESTARTING", "INITIALIZING")


def wait(what: str, cond, every: float = 0.5) -> None:
    """Until cond() holds, saying what it waits for every 30 s (no time limit: a stuck run shows in the log)."""
    t0 = last = time.monotonic()
    while not cond():
        if time.monotonic() - last > 30:
            last = time.monotonic()
            print(f"still waiting for {what} ({last - t0:.0f} s)", flush=True)
        time.sleep(every)


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def sigkill(pid: int, what: str) -> None:
    """SIGKILL `pid` and return once it has exited."""
    os.kill(pid, signal.SIGKILL)
    wait(f"the exit of {what} (pid {pid})", lambda: gone(pid), 0.1)


def services(*args: str, env: dict | None = None) -> dict[str, str]:
    """scripts/services ARGS (start NAME …); the service's env afterwards."""
    p = subprocess.run([str(SERVICES), *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        pytest.fail(f"scripts/services {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}", pytrace=False)
    e = services_env(args[1], env)
    assert e is not None, f"scripts/services {' '.join(args)}: {args[1]} is not running"
    return e


class Cluster:
    def __init__(self, env: dict[str, str]):
        self.env = env
        self.rest = env["FLINK_REST"]

    def get(self, path: str):
        with urllib.request.urlopen(f"http://{self.rest}{path}", timeout=30) as r:
            return json.load(r)

    def jobs(self, states=ACTIVE) -> list[dict]:
        """Jobs of ours (any name starting with the default one) in those states."""
        return [j for j in self.get("/jobs/overview")["jobs"] if j["name"].startswith(NAME) and j["state"] in states]

    def cancel_all(self) -> None:
        for j in self.jobs():
            req = urllib.request.Request(f"http://{self.rest}/jobs/{j['jid']}?mode=cancel", method="PATCH")
            urllib.request.urlopen(req, timeout=30).read()
        wait("no job of ours running", lambda: not self.jobs())

    def taskmanager_pids(self) -> list[int]:
        return [int(p) for p in self.env["FLINK_TASKMANAGER_PIDS"].split(",") if p]


@pytest.fixture(scope="session")
def flink_cluster(flink_jars):
    started = services_env("flink") is None
    cluster = Cluster(services("start", "flink", "--taskmanagers", "2"))
    yield cluster
    if started:
        subprocess.run([str(SERVICES), "stop", "flink"], check=True, capture_output=True)


@pytest.fixture
def cluster(flink_cluster):
    # list it after `database` in a test's arguments: its teardown (jobs cancelled, waited for) then
    # runs before the database is dropped. A job still inserting into a dropped database makes the
    # libchdb server end on an uncaught exception (seen once, after the JobManager test)
    flink_cluster.env = services("start", "flink", "--taskmanagers", "2")  # replaces any a test killed
    flink_cluster.cancel_all()
    yield flink_cluster
    flink_cluster.cancel_all()


def submit_env(cluster: Cluster, tmp: Path, restore: str | None = None) -> dict[str, str]:
    """submit.sh's variables outside the image (docs/operators.md's local cluster)."""
    env = dict(os.environ, FLINK=str(Path(cluster.env["FLINK_HOME"]) / "bin" / "flink"), PYTHON=sys.executable,
               JOB=str(REPO / "flink-jobs" / "shadow_caches.py"), CONNECTOR_JAR=cluster.env["FLINK_CONNECTOR_JAR"],
               CHECKPOINT_DIR=str(tmp / "checkpoints"), FLINK_LOG_DIR=str(tmp / "client-log"),
               PYTHONPATH=str(REPO))
    env.pop("RESTORE", None)
    if restore:
        env["RESTORE"] = restore
    return env


def job_id(p: subprocess.CompletedProcess) -> str:
    print(p.stdout[-3000:], p.stderr[-3000:], flush=True)
    assert p.returncode == 0, f"submit.sh failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    m = re.search(r"JobID ([0-9a-f]{32})", p.stdout)
    assert m, f"submit.sh printed no job id:\n{p.stdout[-4000:]}"
    return m.group(1)


def submit(cluster: Cluster, tmp: Path, bootstrap: str, clickhouse_url: str, topic: str, *extra: str,
           restore: str | None = None) -> str:
    """flink-jobs/submit.sh with the paths outside the image; the new job's id."""
    p = subprocess.run(
        ["bash", str(REPO / "flink-jobs" / "submit.sh"), cluster.rest, "--",
         "--bootstrap", bootstrap, "--topic", topic, "--late-topic", topic + ".late",
         "--reject-topic", topic + ".job-rejects", "--consumer-group", topic, "--clickhouse", clickhouse_url,
         "--checkpoint-dir", (tmp / "checkpoints").as_uri(), "--checkpoint-interval", "3s",
         "--flush-seconds", "0.5", "--monitor-every", "0", *extra],
        capture_output=True, text=True, env=submit_env(cluster, tmp, restore), cwd=tmp)
    return job_id(p)


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


def restarts(cluster: Cluster, job: str) -> int:
    """How often the job restarted (Flink's numRestarts)."""
    got = cluster.get(f"/jobs/{job}/metrics?get=numRestarts")
    return int(float(got[0]["value"])) if got else 0


class Halves:
    """A generated g-stream log shipped in two halves, split at a file close past the middle: the
    first on creation (`first`: events in the topic then), the rest by rest()."""

    def __init__(self, tmp: Path, bootstrap: str, topic: str, events: int, seed: int):
        self.lines = generate(tmp / "all.log", events, seed=seed)
        self.head = next(i for i in range(len(self.lines) // 2, len(self.lines)) if '"file_close"' in self.lines[i])
        self.log, self.bootstrap, self.topic = tmp / "gstream.log", bootstrap, topic
        self.log.write_text("".join(self.lines[:self.head]))
        ship(self.log, bootstrap, topic)
        self.first = len(topic_items(bootstrap, topic))

    def rest(self) -> None:
        with self.log.open("a") as f:
            f.write("".join(self.lines[self.head:]))
        ship(self.log, self.bootstrap, self.topic)


@pytest.fixture
def clickhouse_shards(tmp_path):
    """scripts/services start clickhouse --shards 2 in a var/ of its own: (its env for
    scripts/services, clickhouse.env), stopped afterwards."""
    env = dict(os.environ, CACHESCOPE_VAR_DIR=str(tmp_path / "var"))
    e = services("start", "clickhouse", "--shards", "2", env=env)
    yield env, e
    subprocess.run([str(SERVICES), "stop", "clickhouse"], capture_output=True, env=env)
