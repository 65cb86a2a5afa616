"""`cachescope --help` is typer's own text, kept after its first rendering (cli/_help_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]


def _help(cache: Path, columns: int, code: str = "from cli import main; main()") -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "COLUMNS": str(columns), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code, "--help"], env=env, capture_output=True, text=True, check=True)


def test_root_help_is_typers_text_rendered_once_then_kept(tmp_path, monkeypatch):
    from cli import _help_cache

    for columns in (80, 60):
        first, again = _help(tmp_path, columns), _help(tmp_path, columns)
        # typer's app itself, no cache
        want = _help(tmp_path, columns, "from cli import app; app(prog_name='cachescope')").stdout
        assert first.stdout == again.stdout == want
        assert "Commands:" in want and "replay" in want
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        monkeypatch.setenv("COLUMNS", str(columns))
        kept = _help_cache._path()
        assert kept.read_text() == want  # one file per width: wrapping differs
    assert len(list((tmp_path / "cachescope").glob("help-*.txt"))) == 2
    # the kept text is what later calls print (not a second rendering)
    kept.write_text("kept text\n")
    assert _help(tmp_path, 60).stdout == "kept text\n"
