"""The collector's durable spool into a real Kafka broker: a restart mid-capture ships each access once
(unit/ingest/test_spool.py: the spool itself)."""

from __future__ import annotations

import signal

import orjson
import pytest

from ingest.xrootd_monitoring.capture import read_capture

# the helpers of the same tests' chDB half (conftest.py makes every test folder importable)
from test_spool import Collect, RUN, _poll, _spooled, needs_lab


@needs_lab
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_collect_to_kafka_restarted_mid_capture_ships_each_access_once(sig, kafka, kafka_topic, tmp_path):
    import msgspec
    from support.services import topic_items

    from cachescope.config import load_config
    from ingest.xrootd_monitoring.assemble import Assembler

    payloads = read_capture(RUN)
    half = len(payloads) // 2
    to = f"kafka://{kafka.bootstrap}/{kafka_topic}"
    d = tmp_path / "spool"
    c = Collect(to, kafka_topic, d)
    c.send(payloads[:half])
    while _spooled(d) < half:  # received: on disk, whatever was decoded or shipped
        _poll()
    c.stop(sig)
    c = Collect(to, kafka_topic, d)
    c.send(payloads[half:])
    stats = c.stop()  # decodes what is spooled, ships it, keeps what is held for a next run
    assert stats["datagrams"] == len(payloads) and stats["lost_datagrams"] == 0
    asm = Assembler(load_config())  # one collector throughout, stopped at the same point
    ref = []
    for p in payloads:
        ref += asm.feed(p, "127.0.0.1")
    ref = [orjson.loads(msgspec.json.encode(e)) for e in ref]
    events = topic_items(kafka.bootstrap, kafka_topic)
    key = lambda e: (e["origin"], e["seq"])  # noqa: E731
    assert len({key(e) for e in events}) == len(events) == len(ref) > 900
    assert sorted(events, key=key) == sorted(ref, key=key)
