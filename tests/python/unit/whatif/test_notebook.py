"""The notebook API (cachescope.whatif, cachescope/notebook.py): docs/api.md's example runs as written,
and its DataFrames carry the what-if's numbers, NaN where nothing was read."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from test_api import FROM, TO, run, write_trace

API_DOC = Path(__file__).resolve().parents[4] / "docs" / "api.md"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("notebook")
    write_trace(d / "a.csv", 3000, seed=1)
    out = run("replay", "--format", "csv", "--site", "SITE-A", "--store", str(d / "var" / "store"), str(d / "a.csv"))
    assert out.returncode == 0, out.stderr
    return d


def test_the_documented_example_runs(workdir):
    section = API_DOC.read_text().split("## From a notebook", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "AOD" in out.stdout and "smallest_size_bytes" in out.stdout and "lower_value" in out.stdout


def test_whatif_frames_equal_the_library_answer_and_empty_is_nan(workdir):
    code = f"""
import datetime as dt, math
import cachescope
from cachescope.replay import WhatIf, run_whatif
from cachescope.notebook import connect
store = "var/store"
df = cachescope.whatif(store, "lru,arc", "200GB,1TB", "{FROM}", "{TO}")
start, end = (dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in ("{FROM}", "{TO}"))
res = run_whatif(connect(store), WhatIf(["lru", "arc"], [200 * 10**9, 10**12], start, end))
want = [(a["policy"], a["size_bytes"], a["hits"], a["hit_ratio"], a["byte_hit_ratio"]) for a in res.answers()]
got = [(r.policy, r.size_bytes, r.hits, r.hit_efficiency, r.transfer_efficiency) for r in df.itertuples()]
assert got == want, (got, want)
tiers = cachescope.whatif(store, "lru", "1TB", "{FROM}", "{TO}", by="tier")
assert tiers["requests"].sum() == df.loc[(df.policy == "lru") & (df.size_bytes == 10**12), "requests"].item()
empty = cachescope.whatif(store, "lru", "1TB", "2001-01-01", "2001-01-02")
assert empty["requests"].item() == 0 and math.isnan(empty["hit_efficiency"].item())
assert math.isnan(empty["transfer_efficiency"].item())
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    check = subprocess.run([sys.executable, "-c", "import sys, cachescope; print('numpy' in sys.modules, "
                            "'pandas' in sys.modules)"], capture_output=True, text=True)
    assert check.stdout.split() == ["False", "False"]  # `import cachescope` stays cheap: the notebook loads on use


def test_an_empty_window_has_no_efficiency_on_every_python_path(workdir):
    # one rule (docs/definitions.md): nothing read → null in JSON, NaN in DataFrames, blank in
    # tables; what-if, simulate's counters and the LRU curve said 0.0 (a cache that missed everything)
    code = """
import datetime as dt, math
import numpy as np
from cachescope.notebook import connect
from cachescope.replay import WhatIf, run_whatif
from cachescope.report import belady_points
from cachescope.simulation import FIELDS, LruCurve
from cachescope.specs import ratios
r = ratios(np.zeros(len(FIELDS), np.uint64))
assert r["hit_ratio"] is None and r["byte_hit_ratio"] is None, r
p = LruCurve([10**9], 1).points()[0]
assert p["hit_ratio"] is None and p["byte_hit_ratio"] is None, p
a, b = dt.datetime(2001, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2001, 1, 2, tzinfo=dt.timezone.utc)
w = run_whatif(connect("var/store"), WhatIf(["lru"], [10**12], a, b)).answers()[0]
assert w["requests"] == 0 and w["hit_ratio"] is None and w["byte_hit_ratio"] is None, w
assert belady_points(connect("var/store"), a, b, "SITE-A", [10**12])[0].empty
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    args = ["whatif", "--store", str(workdir / "var" / "store"), "--policy", "lru", "--size", "1TB",
            "--from", "2001-01-01", "--to", "2001-01-02"]
    js = run(*args, "--json")
    assert js.returncode == 0, js.stderr
    row = orjson.loads(js.stdout)
    assert row["requests"] == 0 and row["hit_ratio"] is None and row["byte_hit_ratio"] is None
    table = run(*args)
    assert table.returncode == 0 and "0.0000" not in table.stdout, table.stdout + table.stderr


def test_a_name_the_store_lacks_is_refused_by_the_cli_and_the_notebook_alike(workdir):
    """A typo in --cache-group (or --site, an excluded tier) replayed nothing and answered 0
    requests from the notebook: one check in the library (replay.check_names, the read layer's
    source of known names, behind the API's 422 too) refuses it in the CLI and the notebook."""
    store = str(workdir / "var" / "store")
    for option, value in (("--cache-group", "SITE-Ax"), ("--cache-group", "SITE-A,MWT2x"), ("--site", "SITE-Ax")):
        out = run("whatif", "--store", store, "--policy", "lru", "--size", "1TB", "--from", FROM, "--to", TO,
                  option, value)
        assert out.returncode == 1, (option, out.stdout, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and f": {option} {value.split(',')[-1]}: " in lines[0] and "known:" in lines[0], out.stderr
        assert "SITE-A" in lines[0] and "Traceback" not in out.stderr
        assert "requests" not in out.stdout and not out.stdout.strip()
    out = run("whatif", "--store", store, "--policy", "lruu", "--size", "1TB", "--from", FROM, "--to", TO)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "--policy" in out.stderr and "lru" in out.stderr
    code = f"""
import cachescope
from cachescope.errors import UserError
for kw in ({{"cache_group": "SITE-Ax"}}, {{"cache_group": ["SITE-A", "MWT2x"]}}, {{"site": "SITE-Ax"}},
           {{"exclude_tiers": ["AODD"]}}):
    try:
        cachescope.whatif("var/store", "lru", "1TB", "{FROM}", "{TO}", **kw)
    except UserError as e:
        assert "known:" in str(e) and ("SITE-A" in str(e) or "AOD" in str(e)), (kw, str(e))
    else:
        raise AssertionError(f"{{kw}}: answered")
assert cachescope.whatif("var/store", "lru", "1TB", "{FROM}", "{TO}", cache_group="SITE-A")["requests"].item() > 0
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
