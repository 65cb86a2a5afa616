"""Only the servers a site names count (`--allow`, `collect.allow`), and two senders never share an
identity: a server id and start time seen from a second address is a conflict, dropped, never
merged (ingest/xrootd_monitoring/senders.py, assemble.py). Senders are addresses of the loopback
range (127.0.0.2 is this machine too)."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from test_collect import CLI, RUNS, Collect, datagrams

pytestmark = pytest.mark.skipif(not RUNS, reason="the xcache-lab captures are not here")
RUN = "run1-default"


def send_from(ip: str, address: tuple[str, int], payloads) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((ip, 0))
        for d in payloads:
            s.sendto(d, address)


def forged(d: bytes) -> bytes:
    """The datagram another sender would send to pass for the real server: its server id and
    start time, other paths (same length, so every header stays true)."""
    return d.replace(b"/store/mc/", b"/store/XX/")


def test_a_sender_not_allowed_is_counted_and_dropped(tmp_path):
    c = Collect(tmp_path, "--allow", "127.0.0.1/32")
    send_from("127.0.0.2", c.address, datagrams(RUN))
    c.send(datagrams(RUN))  # from 127.0.0.1
    events, stats, err = c.finish()
    n = len(datagrams(RUN))
    assert len(events) == 1000 and stats["refused_datagrams"] == n
    assert stats["refused_senders"] == {"127.0.0.2": n}
    assert {e["origin"].split("/")[0] for e in events} == {"xrootd:127.0.0.1"}  # the sender names the origin
    assert f"{n} from senders not allowed" in err


def test_the_config_key_names_the_senders_too(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("collect:\n  allow: [127.0.0.3]\n")
    c = Collect(tmp_path, "--config", str(cfg))
    c.send(datagrams("run3-prefetch0-asyncoff"))
    events, stats, _ = c.finish()
    assert events == [] and stats["refused_datagrams"] == len(datagrams("run3-prefetch0-asyncoff"))


def test_on_loopback_the_loopback_range_is_allowed_without_a_list(tmp_path):
    c = Collect(tmp_path)
    send_from("127.0.0.2", c.address, datagrams(RUN))
    events, stats, _ = c.finish()
    assert len(events) == 1000 and stats["refused_datagrams"] == 0
    assert {e["origin"].split("/")[0] for e in events} == {"xrootd:127.0.0.2"}


@pytest.mark.parametrize("argv, says", [
    (["collect", "--listen", "udp://0.0.0.0:9930", "--out", "-"], "--allow"),
    (["collect", "--listen", "udp://[::]:9930", "--out", "-"], "--allow"),
    (["collect", "--listen", "udp://127.0.0.1:0", "--out", "-", "--allow", "10.0.0.300/8"], "10.0.0.300/8"),
    (["serve", "--store", "{store}", "--collect", "udp://0.0.0.0:9930"], "--allow"),
    (["serve", "--store", "{store}", "--allow", "127.0.0.1"], "go with --collect"),
])
def test_listening_beyond_loopback_needs_an_allow_list(argv, says, tmp_path):
    """Refused before anything listens: one line saying how to name the servers, exit 2. (In a
    network namespace of its own: were it to listen after all, nothing outside would reach it.)"""
    argv = [a.replace("{store}", str(tmp_path / "store")) for a in argv]
    isolated = ["unshare", "--net"] if shutil.which("unshare") and subprocess.run(
        ["unshare", "--net", "true"], capture_output=True).returncode == 0 else []
    p = subprocess.Popen([*isolated, CLI, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    first = p.stderr.readline()
    if re.search(r"listening on|collecting", first):  # it started: stop it, and fail
        p.send_signal(signal.SIGTERM)
    err = first + p.stderr.read()
    p.wait()
    assert p.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in p.stderr
    if "0.0.0.0" in " ".join(argv) or "::" in " ".join(argv):
        assert "CIDR" in lines[0] and "collect" in lines[0]


def test_a_server_id_and_start_time_from_a_second_sender_is_a_conflict_never_merged(tmp_path):
    payloads = datagrams(RUN)
    plain = Collect(tmp_path, name="plain")
    plain.send(payloads)
    ref, _, _ = plain.finish()
    c = Collect(tmp_path, name="forged")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as liar:
        liar.bind(("127.0.0.2", 0))
        for d in payloads:  # each real datagram, then its forgery
            c.sock.sendto(d, c.address)
            liar.sendto(forged(d), c.address)
    events, stats, _ = c.finish()
    claims = sum(1 for d in payloads if d[:1] in (b"g", b"f", b"="))  # those naming the server id
    assert stats["conflict_datagrams"] == claims
    assert events == ref  # nothing of the second sender landed, nothing of the real one changed
    assert not any("/store/XX/" in e["path"] for e in events)


def test_live_mode_a_forged_sender_never_replaces_a_real_access_in_the_store(tmp_path):
    from cachescope.store import open_store

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        api_port = s.getsockname()[1]
    store = tmp_path / "store"
    p = subprocess.Popen([CLI, "serve", "--store", str(store), "--port", str(api_port), "--collect",
                          "udp://127.0.0.1:0", "--allow", "127.0.0.1,127.0.0.2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    payloads = datagrams(RUN)
    try:
        line = p.stderr.readline().decode()
        m = re.search(r"collecting XRootD monitoring on udp://([\d.]+):(\d+)", line)
        assert m, line + p.stderr.read().decode()
        address = (m.group(1), int(m.group(2)))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as real, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as liar:
            liar.bind(("127.0.0.2", 0))
            for d in payloads:
                real.sendto(d, address)
                liar.sendto(forged(d), address)
        metrics = ""
        for _ in range(3000):  # until every datagram is decoded (a count of polls, no clock)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/metrics") as r:
                    metrics = r.read().decode()
            except OSError:
                metrics = ""
            if f"cachescope_collect_datagrams_total {2 * len(payloads)}.0" in metrics:
                break
            assert p.poll() is None, p.stderr.read().decode()
            time.sleep(0.1)
        claims = sum(1 for d in payloads if d[:1] in (b"g", b"f", b"="))
        assert f"cachescope_collect_conflict_datagrams_total {claims}.0" in metrics
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate()
    assert p.returncode == 0, err.decode()
    with open_store(store_dir=store) as st:
        rows = st.query("SELECT origin, count(), uniqExact(seq), countIf(path LIKE '/store/XX/%') "
                        "FROM access_events GROUP BY origin").rows
        health = dict(st.query("SELECT metric, max(value) FROM pipeline_health WHERE component = 'collect' "
                               "GROUP BY metric").rows)
    assert len(rows) == 1
    origin, n, distinct, forged_rows = rows[0]
    assert origin.startswith("xrootd:127.0.0.1/") and n == distinct == 1000 and forged_rows == 0
    assert health["conflict_datagrams"] == claims
