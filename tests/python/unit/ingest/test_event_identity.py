"""Event identity (cache_group, origin, seq): several log streams of one format feeding one cache
group never collapse into each other, on chDB (separate `replay` runs) and on the ClickHouse
server (shippers → Kafka → Flink). The logs are copies of one HTTP access log with one-second
timestamps, so every event of one copy has the same (ts, seq, source) as its twin in the others:
under the old key the store kept one of each.
The ClickHouse-server half: tests/python/integration/runners/test_event_identity_flink.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cachescope import reads
from cachescope.config import load_config
from cachescope.store import open_store
from ingest.pipeline import LineParser, open_lines

CLI = Path(sys.executable).parent / "cachescope"


def http_log(tmp: Path, events: int = 3000) -> Path:
    out = tmp / "gen"
    subprocess.run([str(CLI), "generate", "--out", str(out), "-f", "http-access", "-n", str(events), "--days", "0.1",
                    "--seed", "5"], check=True, capture_output=True)
    logs = sorted(out.rglob("*.log")) or sorted(p for p in out.rglob("*") if p.is_file())
    return logs[0]


def copies(log: Path, tmp: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        p = tmp / f"server{i}" / "access.log"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(log.read_bytes())
        paths.append(p)
    return paths


def parsed(path: Path):
    with open_lines(path) as f:
        return LineParser("http-access", config=load_config(), site="SITE", source_name=str(path),
                          on_reject=lambda r: None).parse_all(f)


@pytest.mark.parametrize("servers", [2, 8])
def test_separate_replays_of_several_servers_keep_every_access(tmp_path, servers):
    logs = copies(http_log(tmp_path), tmp_path, servers)
    per_log = len(parsed(logs[0]))
    assert per_log > 1000
    store = tmp_path / "store"
    for log in logs:  # one run per server's log, as a backfill would do it
        out = subprocess.run([str(CLI), "replay", "--format", "http-access", "--site", "SITE", "--store", str(store),
                              str(log)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    again = subprocess.run([str(CLI), "replay", "--format", "http-access", "--site", "SITE", "--store", str(store),
                            str(logs[0])], capture_output=True, text=True)  # a repeat changes nothing
    assert again.returncode == 0, again.stderr
    with open_store(store_dir=store) as st:
        assert st.query("SELECT count() FROM access_events FINAL").scalar() == servers * per_log
        assert st.query("SELECT uniqExact(origin) FROM access_events").scalar() == servers
        groups = reads.cache_groups(st)
        first, last = groups["first_access"].min(), groups["last_access"].max()
        import datetime as dt

        got = reads.whatif_accesses(st, first.to_pydatetime(), last.to_pydatetime() + dt.timedelta(seconds=1))
    assert len(got) == servers * per_log
    # same-second accesses keep file order: one origin's rows, read in (ts, origin, seq) order, are
    # its log's events in their order (stable by time)
    mine = got[got["origin"] == f"file:{__import__('socket').gethostname()}:{logs[0]}"]
    want = sorted(parsed(logs[0]), key=lambda e: e.ts)
    assert mine["seq"].tolist() == [e.seq for e in want]
    assert mine["file_id"].tolist() == [e.file_id for e in want]
    seconds = mine["ts_us"] // 1_000_000
    assert (seconds.value_counts() > 1).any(), "the log must have same-second accesses for this test to mean something"
