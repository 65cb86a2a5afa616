"""scripts/services: status of the session's servers, and a full start/status/stop cycle of a
second pair of servers in a separate var/ directory (so the session's are untouched)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import urllib.request

import pytest

from support.services import SERVICES, services_env

pytestmark = pytest.mark.services


def run(*args, env=None):
    return subprocess.run([str(SERVICES), *args], capture_output=True, text=True, env=env)


def test_status_lists_the_running_servers(kafka, clickhouse):
    p = run("status")  # all: 0 only when every service runs (the session's Flink cluster is optional)
    assert p.returncode == (0 if all(services_env(n) for n in _defined_services()) else 3), p.stdout + p.stderr
    assert f"kafka: running pid {kafka.env['KAFKA_PID']}" in p.stdout
    assert f"clickhouse: running pid {clickhouse.env['CLICKHOUSE_PID']}" in p.stdout
    assert kafka.bootstrap.startswith("127.0.0.1:")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _only_loopback(port: int) -> bool:
    """Every socket listening on `port` is bound to 127.0.0.1 (from /proc/net/tcp)."""
    hexport = f"{port:04X}"
    addrs = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.rsplit(":", 1)
                if p == hexport and state == "0A":  # LISTEN
                    addrs.append(addr)
    # IPv4 127.0.0.1, or the same as an IPv4-mapped IPv6 address (Java binds that way)
    return bool(addrs) and all(a in ("0100007F", "0000000000000000FFFF00000100007F") for a in addrs)


@pytest.mark.parametrize("name", ["clickhouse", "kafka"])
def test_start_status_stop_cycle(name, tmp_path):
    env = dict(os.environ, CACHESCOPE_VAR_DIR=str(tmp_path / "var"))
    assert run("status", name, env=env).returncode == 3
    p = run("start", name, env=env)
    assert p.returncode == 0, p.stderr
    e = services_env(name, env)
    assert e is not None
    pid = int(e[f"{name.upper()}_PID"])
    ports = [int(e["CLICKHOUSE_TCP_PORT"]), int(e["CLICKHOUSE_HTTP_PORT"])] if name == "clickhouse" else \
        [int(e["KAFKA_PORT"]), int(e["KAFKA_CONTROLLER_PORT"])]
    try:
        assert all(_listening(p) and _only_loopback(p) for p in ports)
        if name == "clickhouse":
            url = f"http://127.0.0.1:{ports[1]}/"
            body = b"CREATE TABLE default.keep (a UInt8) ENGINE = MergeTree ORDER BY a"
            urllib.request.urlopen(urllib.request.Request(url, data=body)).read()
            urllib.request.urlopen(urllib.request.Request(url, data=b"INSERT INTO default.keep VALUES (42)")).read()
        st = run("status", name, env=env)
        assert st.returncode == 0 and f"running pid {pid}" in st.stdout
        again = run("start", name, env=env)  # already running: nothing new
        assert again.returncode == 0 and "already running" in again.stderr
        assert services_env(name, env)[f"{name.upper()}_PID"] == str(pid)
    finally:
        stop = run("stop", name, env=env)
    assert stop.returncode == 0, stop.stderr
    assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert run("status", name, env=env).returncode == 3
    assert services_env(name, env) is None
    if name == "clickhouse":
        # data persists in var/clickhouse across a restart, on the same ports when free
        assert run("start", name, env=env).returncode == 0
        try:
            e2 = services_env(name, env)
            assert int(e2["CLICKHOUSE_HTTP_PORT"]) == ports[1]
            url = f"http://127.0.0.1:{e2['CLICKHOUSE_HTTP_PORT']}/"
            got = urllib.request.urlopen(urllib.request.Request(url, data=b"SELECT a FROM default.keep")).read()
            assert got == b"42\n"
        finally:
            assert run("stop", name, env=env).returncode == 0


def _defined_services() -> list[str]:
    """Every service of the script: a name with both start_NAME() and stop_NAME() (read from its text)."""
    text = SERVICES.read_text()
    starts = re.findall(r"^start_(\w+)\(\)", text, re.M)
    stops = set(re.findall(r"^stop_(\w+)\(\)", text, re.M))
    return [n for n in starts if n in stops]


def test_all_is_every_service_the_script_runs(tmp_path):
    """`all` is not a list kept by hand: status and stop cover every service the script defines
    (Flink included; one added later is covered once it has start_/stop_ functions)."""
    env = dict(os.environ, CACHESCOPE_VAR_DIR=str(tmp_path / "var"))
    names = _defined_services()
    assert {"kafka", "clickhouse", "flink"} <= set(names)
    st = run("status", env=env)
    assert st.returncode == 3, st.stdout + st.stderr  # none is running
    assert sorted(line.split(":")[0] for line in st.stdout.splitlines()) == sorted(names)
    stop = run("stop", "all", env=env)
    assert stop.returncode == 0, stop.stderr
    assert all(f"{n}: not running, nothing to stop" in stop.stderr for n in names), stop.stderr
    bad = run("stop", "kafak", env=env)
    assert bad.returncode == 2 and "unknown service 'kafak'" in bad.stderr


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_stop_all_stops_a_flink_cluster_too(tmp_path, flink_jars):
    """After `start flink --taskmanagers 2`, `stop all` stops the JobManager and both TaskManagers
    (before, `all` was Kafka and ClickHouse: it exited 0 and left the cluster running), and says so."""
    env = dict(os.environ, CACHESCOPE_VAR_DIR=str(tmp_path / "var"))
    started = run("start", "flink", "--taskmanagers", "2", env=env)
    assert started.returncode == 0, started.stderr
    e = services_env("flink", env)
    pids = [int(e["FLINK_JOBMANAGER_PID"])] + [int(p) for p in e["FLINK_TASKMANAGER_PIDS"].split(",")]
    assert len(pids) == 3 and not any(_gone(p) for p in pids)
    try:
        st = run("status", env=env)
        assert f"flink: running jobmanager pid {pids[0]}" in st.stdout, st.stdout
        stop = run("stop", "all", env=env)
    finally:
        run("stop", "flink", env=env)  # whatever happened above, nothing of this test stays running
    assert stop.returncode == 0, stop.stderr
    assert [p for p in pids if not _gone(p)] == [], stop.stderr
    assert f"flink stopped (jobmanager pid {pids[0]}" in stop.stderr
    assert "kafka: not running, nothing to stop" in stop.stderr
    assert services_env("flink", env) is None
