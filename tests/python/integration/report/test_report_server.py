"""`cachescope report` from a ClickHouse server (unit/report/test_report.py: from chDB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cachescope.config import load_config
from ingest.generate import make_workload, write
from ingest.scenarios import apply
from runners.embedded import replay

CLI = str(Path(sys.executable).parent / "cachescope")


@pytest.mark.services
def test_report_from_the_clickhouse_server(clickhouse, tmp_path):
    import uuid

    from cachescope.store import ClickHouseStore

    w, _ = apply("hit-drop", make_workload(20_000, days=2, sites=1, servers=2, seed=17))
    files = write("xrootd-gstream", w, tmp_path / "logs", single_file=False)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({"site": w.sites[0], "pipeline": {
        "shadow": {"policies": ["lru"], "sizes": ["2TB", "10TB"]}, "curve": {"points": 8}}}))
    db = f"report_{uuid.uuid4().hex[:8]}"
    store = ClickHouseStore(clickhouse.url, database=db)
    try:
        replay(files, "xrootd-gstream", config=load_config(tmp_path / "site.yaml"), store=store)
        out = tmp_path / "out"
        p = subprocess.run([CLI, "report", "--clickhouse", clickhouse.url, "--database", db, "--out", str(out)],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        page = (out / "report.html").read_text()
        assert page.count('src="data:image/png;base64,') == 6 and "belady" in page
    finally:
        store.command(f"DROP DATABASE IF EXISTS {db}")
        store.close()
