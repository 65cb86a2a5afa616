"""scripts/services: status of the session's servers, and a full start/status/stop cycle of a
second pair of servers in a separate var/ directory (so the session's are untouched)."""

from __future__ import annotations

import os
import socket
import subprocess
import urllib.request

import pytest

from services import SERVICES, services_env

pytestmark = pytest.mark.services


def run(*args, env=None):
    return subprocess.run([str(SERVICES), *args], capture_output=True, text=True, env=env)


def test_status_lists_the_running_servers(kafka, clickhouse):
    p = run("status")
    assert p.returncode == 0, p.stdout + p.stderr
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
