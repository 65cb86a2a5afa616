"""A ClickHouse shard server SIGKILLed under the running job and started again on its directory and
ports: the job's row writer (cachescope/core/writer.py) retries its inserts with back-off instead
of failing the job, nothing is lost or doubled, and the outage is in pipeline_health where the
pipeline-health dashboard's "Store outages" panel reads it.

The production topology as local processes: the standalone Flink cluster and the job submitted by
flink-jobs/submit.sh (test_flink_cluster.py), two ClickHouse shards with the Distributed schema of
cachescope/store/cluster.py (test_clickhouse_shards.py); every table compared with the core run
directly on the same accesses.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachescope import reads
from cachescope.config import load_config
from cachescope.store import ClickHouseStore
from support.clusters import (REPO, Halves, clickhouse_shards, cluster, completed_checkpoints,  # noqa: F401 (fixtures)
                      flink_cluster, job_state, restarts, services, sigkill, submit, wait, wait_rows)
from support.services import topic_items
from test_flink_job import assert_store_equals, expected

pytestmark = pytest.mark.services
RETRIED = "the store is unreachable"  # the writer's log line at each retry


def retry_lines(log_dir: str) -> int:
    """The writer's retry warnings in the TaskManagers' logs (PyFlink forwards a worker's logging there)."""
    n = 0
    for f in Path(log_dir).glob("*"):
        if f.is_file():
            n += f.read_text(errors="replace").count(RETRIED)
    return n


def test_a_clickhouse_shard_killed_mid_stream_and_started_again_loses_and_doubles_nothing(
        cluster, kafka, clickhouse_shards, kafka_topic, tmp_path):
    env, e = clickhouse_shards
    ports = e["CLICKHOUSE_TCP_PORTS"].split(",")
    # the production schema in a database of its own, without the raw events' TTL (the generated
    # logs are from 2024), applied on each shard as scripts/services does
    for port in ports:
        p = subprocess.run([sys.executable, "-m", "cachescope.store.cluster", "apply", "--clickhouse",
                            f"clickhouse://127.0.0.1:{port}", "--database", "outage", "--cluster",
                            e["CLICKHOUSE_CLUSTER"], "--no-replicated", "--events-ttl-days", "0"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert p.returncode == 0, p.stderr
    url = e["CLICKHOUSE_URL"].replace("/cachescope?", "/outage?")
    assert url != e["CLICKHOUSE_URL"]
    store = ClickHouseStore(url)  # the Distributed tables, as serve reads them
    try:
        stream = Halves(tmp_path, kafka.bootstrap, kafka_topic, 16_000, seed=23)
        first = stream.first
        job = submit(cluster, tmp_path, kafka.bootstrap, url, kafka_topic, "--parallelism", "1")
        wait_rows(cluster, job, store, {"access_events": first})
        done = completed_checkpoints(cluster, job)
        wait("a checkpoint holding the first half", lambda: completed_checkpoints(cluster, job) > done)
        before = retry_lines(cluster.env["FLINK_LOG_DIR"])
        started = dt.datetime.now(dt.timezone.utc)

        victim = int(e["CLICKHOUSE_PIDS"].split(",")[1])
        sigkill(victim, "ClickHouse shard 2")
        # the second half arrives while the shard is down: every write of it meets the outage
        stream.rest()
        # a writer that does not retry fails the job instead: it restarts (or fails) without a retry line
        wait("the writer retrying", lambda: retry_lines(cluster.env["FLINK_LOG_DIR"]) >= before + 2
             or restarts(cluster, job) > 0 or job_state(cluster, job) != "RUNNING")
        assert restarts(cluster, job) == 0 and retry_lines(cluster.env["FLINK_LOG_DIR"]) >= before + 2, \
            "the job failed on the shard's outage instead of its writer retrying"
        e2 = services("start", "clickhouse", "--shards", "2", env=env)  # same directory and ports
        assert e2["CLICKHOUSE_TCP_PORTS"] == e["CLICKHOUSE_TCP_PORTS"]
        assert int(e2["CLICKHOUSE_PIDS"].split(",")[1]) != victim

        events = topic_items(kafka.bootstrap, kafka_topic)
        want = expected(events, load_config().pipeline, finish=False)
        wait_rows(cluster, job, store, {t: len(df) for t, df in want.items()})
        assert_store_equals(store, want)
        assert restarts(cluster, job) == 0, "the job restarted: the writer did not ride out the outage"

        # the outage as the pipeline-health dashboard's panel reads it
        wait("the outage reported", lambda: store.query(
            "SELECT count() FROM pipeline_health WHERE component = 'writer'").scalar() >= 2)
        got = reads.pipeline_health(store, started, dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1), 3600,
                                    metrics=["store_retries", "store_unavailable_s"])
        outage = {m: v for c, m, v in zip(got["component"], got["metric"], got["value"]) if c == "writer"}
        print(f"writer outage: {outage}", flush=True)
        assert outage["store_retries"] >= 2 and outage["store_unavailable_s"] > 0
    finally:
        store.close()
