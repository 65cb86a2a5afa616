"""The compiled engine is the one its source describes, or cachescope stops at start with one line
saying to rebuild: never a silent slow or different path (cachescope/engine.py, simcore/build.rs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cachescope.engine import SOURCE, EngineError, _simcore, check, source_digest

REPO = Path(__file__).resolve().parents[4]
CLI = str(Path(sys.executable).parent / "cachescope")


@pytest.fixture
def newer_source(tmp_path) -> Path:
    """simcore/src with one file changed after the engine was built (the engine itself untouched)."""
    src = tmp_path / "src"
    shutil.copytree(SOURCE, src)
    with open(src / "billing.rs", "a") as f:
        f.write("\n// changed after the build\n")
    return src


def test_the_built_engine_carries_the_digest_of_this_checkouts_source():
    assert _simcore.SOURCE_DIGEST == source_digest(SOURCE)
    check(_simcore)  # no error


def test_an_engine_older_than_its_source_is_an_error_saying_to_rebuild(newer_source):
    with pytest.raises(EngineError, match="built from other Rust sources .* rebuild it with scripts/setup"):
        check(_simcore, newer_source)
    (newer_source / "new.rs").write_text("// a file the build never saw\n")
    assert source_digest(newer_source) != _simcore.SOURCE_DIGEST


def test_a_command_with_a_stale_engine_stops_at_start_with_one_line(newer_source, tmp_path):
    log = tmp_path / "billing-2024.01.31"
    log.write_text("01.31 07:47:49 [pool:pool1:transfer] [00AB,10] [/a/f] <Unknown>:<Unknown>@osm 10 40 false "
                   '{Xrootd-5.0:h1:1094} [door:D@d:1] {0:"msg"}\n')
    env = {**os.environ, "PYTHONPATH": str(REPO), "CACHESCOPE_SIMCORE_SRC": str(newer_source)}
    for args in (["parse", "--format", "dcache-billing", str(log)], ["parse", "--format", "xrootd-gstream", str(log)]):
        p = subprocess.run([CLI, *args], env=env, capture_output=True, text=True)
        assert p.returncode == 1, p.stderr
        assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "rebuild it with scripts/setup" in p.stderr and "Traceback" not in p.stderr
    del env["CACHESCOPE_SIMCORE_SRC"]  # the same command with the engine of this source parses
    p = subprocess.run([CLI, "parse", "--format", "dcache-billing", str(log)], env=env, capture_output=True, text=True)
    assert p.returncode == 0 and '"bytes_read":10' in p.stdout, p.stderr
