"""The shipper against a real Kafka broker: exactly once across a SIGKILL, rotation, dead letters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest

from cachescope.config import load_config
from ingest.shipper import FileFollower, Position, Shipper
from support.services import topic_items

pytestmark = pytest.mark.services
CLI = str(Path(sys.executable).parent / "cachescope")


def csv_log(path: Path, rows: range, header: bool = True) -> None:
    with path.open("a") as f:
        if header:
            f.write("timestamp,obj_id,obj_size,tier,path\n")
        for i in rows:
            f.write(f"{1_700_000_000 + i},{i % 997 + 1},{(i % 13 + 1) * 10**8},AOD,/atlas/f{i % 997}\n")


def test_kill_mid_file_and_restart_sends_every_event_exactly_once(kafka, tmp_path):
    log = tmp_path / "access.csv"
    csv_log(log, range(30_000))
    with log.open("a") as f:
        f.write("this,is,not,a,trace row\n")
    csv_log(log, range(30_000, 40_000), header=False)
    topic = f"events-{uuid.uuid4().hex[:8]}"
    kafka_bootstrap = kafka.bootstrap
    args = [CLI, "ship", "--format", "csv", "--from", str(log), "--to", f"kafka://{kafka_bootstrap}/{topic}",
            "--state", str(tmp_path / "state.json"), "--shipper-id", topic, "--no-follow", "--batch", "500"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = tmp_path / "state.json"
    while p.poll() is None:  # until it has shipped 5,000 lines (or it ended: a short log)
        if state.exists() and orjson.loads(state.read_bytes())["seq"] >= 5_000:
            break
        time.sleep(0.05)
    assert p.poll() is None, "the shipper finished before it could be killed: use a longer log"
    p.send_signal(signal.SIGKILL)
    p.wait()
    killed_at = orjson.loads(state.read_bytes())["seq"]
    assert 0 < killed_at < 40_000
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    events = topic_items(kafka_bootstrap, topic)
    seqs = sorted(e["seq"] for e in events)
    assert seqs == list(range(40_000))  # none lost, none twice
    rejects = topic_items(kafka_bootstrap, topic + ".rejects")
    reasons = {r["line"]: r["reason"] for r in rejects}
    assert 30_002 in reasons  # the malformed line, by its line number


def test_follows_growth_and_rotation(kafka, tmp_path):
    log = tmp_path / "billing.csv"
    csv_log(log, range(100))
    topic = f"rot-{uuid.uuid4().hex[:8]}"
    kafka_bootstrap = kafka.bootstrap
    sh = Shipper("csv", str(log), f"kafka://{kafka_bootstrap}/{topic}", config=load_config(), shipper_id=topic,
                 batch_events=50)
    try:
        sh.run()
        csv_log(log, range(100, 150), header=False)  # growth
        sh.run()
        os.rename(log, tmp_path / "billing.csv.1")  # rotation: a new file under the old name
        csv_log(log, range(150, 170))
        sh.run()
    finally:
        sh.close()
    seqs = sorted(e["seq"] for e in topic_items(kafka_bootstrap, topic))
    assert seqs == list(range(170))


def test_follower_leaves_a_partial_last_line(tmp_path):
    f = tmp_path / "x.log"
    f.write_bytes(b"one\ntw")
    fol = FileFollower(f, Position())
    assert [l for l, _ in fol.lines()] == ["one\n"]
    with f.open("ab") as h:
        h.write(b"o\n")
    assert [l for l, _ in fol.lines()] == ["two\n"]
    fol.close()


def _copytruncate_and_burst(log: Path, rows: range) -> None:
    """logrotate's copytruncate, then the writer's burst: the file regrows past the shipper's old
    offset before it looks again (same inode, a size above its offset)."""
    import shutil

    before = log.stat().st_size
    shutil.copyfile(log, log.with_name(log.name + ".1"))
    with log.open("r+") as f:
        f.truncate(0)
    csv_log(log, rows, header=False)
    assert log.stat().st_size > before


@pytest.mark.parametrize("how", ["following", "restarted", "following-unread", "restarted-unread"])
def test_copytruncate_then_a_burst_past_the_old_offset_ships_every_line_exactly_once(kafka, tmp_path, how):
    """Before: the shipper read on from its old offset in the new content: every line before it
    lost, and the line across it cut in half and sent to the dead letters. Lines written after its
    last read and before the truncation (`-unread`) are read from logrotate's copy."""
    log = tmp_path / "access.csv"
    csv_log(log, range(1000))
    topic = f"trunc-{uuid.uuid4().hex[:8]}"
    url = f"kafka://{kafka.bootstrap}/{topic}"
    state = tmp_path / "state.json"

    def shipper() -> Shipper:
        return Shipper("csv", str(log), url, config=load_config(), shipper_id=topic, state_file=str(state),
                       batch_events=300)

    sh = shipper()
    try:
        def rotate() -> None:
            if how.endswith("-unread"):  # written after the shipper's last read, then copied away
                csv_log(log, range(1000, 1100), header=False)
                _copytruncate_and_burst(log, range(1100, 2500))
            else:
                _copytruncate_and_burst(log, range(1000, 2500))

        if how.startswith("following"):
            checks = []

            def stop() -> bool:  # called each time the shipper is at the end of the file
                checks.append(1)
                if len(checks) == 1:  # everything so far is shipped: rotate before it looks again
                    rotate()
                    return False
                # done once the committed position is the end of the file now under the name
                pos = orjson.loads(state.read_bytes())
                return pos["inode"] == log.stat().st_ino and pos["offset"] == log.stat().st_size

            sh.run(follow=True, poll_seconds=0, stop=stop)
        else:
            sh.run()
            sh.close()
            rotate()
            sh = shipper()  # resumes from the committed position: same inode, offset below the size
            sh.run()
    finally:
        sh.close()
    seqs = sorted(e["seq"] for e in topic_items(kafka.bootstrap, topic))
    assert seqs == list(range(2500))  # none lost, none twice
    assert topic_items(kafka.bootstrap, topic + ".rejects") == []  # no half line
    health = topic_items(kafka.bootstrap, topic + ".health")
    assert sum(h.get("truncated", 0) for h in health) == 1
    assert sum(h["events"] for h in health) == 2500
    assert orjson.loads(state.read_bytes())["offset"] == log.stat().st_size
