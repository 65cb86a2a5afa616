"""`cachescope collect --to kafka://` against a real broker, on the lab's captures (unit/ingest/test_collect.py:
the rest of collect)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess

import msgspec
import orjson
import pytest

from cachescope.config import load_config
from ingest.xrootd_monitoring.assemble import Assembler

# the helpers of the same tests' chDB half (conftest.py makes every test folder importable)
from test_collect import CLI, RUNS, _feed, datagrams

pytestmark = pytest.mark.skipif(not RUNS, reason="the xcache-lab captures are not here")


@pytest.mark.services
def test_to_kafka_exactly_once_across_a_restart_of_the_collector(kafka, kafka_topic, tmp_path):
    from support.services import topic_items

    run = "run1-default"
    payloads = datagrams(run)
    half = len(payloads) // 2
    to = f"kafka://{kafka.bootstrap}/{kafka_topic}"
    seen = []
    for part in (payloads[:half], payloads[half:]):
        p = subprocess.Popen([CLI, "collect", "--listen", "udp://127.0.0.1:0", "--to", to, "--collector-id",
                              kafka_topic, "--stats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        line = p.stderr.readline().decode()
        m = re.search(r"listening on udp://([\d.]+):(\d+)", line)
        assert m, line + p.stderr.read().decode()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for d in part:
                sock.sendto(d, (m.group(1), int(m.group(2))))
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate()
        assert p.returncode == 0, err.decode()
        seen.append(next(json.loads(ln)["stats"] for ln in err.decode().splitlines() if ln.startswith('{"stats"')))
    events = topic_items(kafka.bootstrap, kafka_topic)
    asm = Assembler(load_config())  # the same capture, one collector throughout
    ref = [orjson.loads(msgspec.json.encode(e)) for e in _feed(asm, payloads) + asm.finish()]
    assert sorted(e["seq"] for e in events) == list(range(1000))  # numbering continued, none twice
    key = lambda e: e["seq"]  # noqa: E731
    assert sorted(events, key=key) == sorted(ref, key=key)
    health = topic_items(kafka.bootstrap, kafka_topic + ".health")
    assert sum(h["events"] for h in health) == 1000
    assert sum(h["lines"] for h in health) == len(payloads)  # datagrams, as committed
    # the second collector starts mid-sequence: nothing is lost (its first datagram sets the counter)
    assert sum(h.get("counts", {}).get("lost_datagrams", 0) for h in health) == 0
