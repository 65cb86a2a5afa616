"""`cachescope --help` from a cache of typer's own rendering.

Building the app for the root help (importing typer and every command module, turning their
signatures into click parameters) costs ~0.1 s of the 0.15 s start-up budget, yet the text
changes only with the command-line sources, typer, Python and the width click wraps to. So the
first `--help` renders it with typer and keeps it under the user's cache directory, keyed by
those; later calls print the kept text without importing typer.
"""

import os
import sys
import zlib
from importlib.util import find_spec
from pathlib import Path


def _path() -> Path | None:
    try:
        from shutil import get_terminal_size

        parts = [sys.version, str(min(get_terminal_size().columns, 80))]  # click's formatter width
        spec = find_spec("typer")
        sources = sorted(Path(__file__).parent.glob("*.py"))
        for p in sources + ([Path(spec.origin)] if spec and spec.origin else []):
            st = p.stat()
            parts.append(f"{p}:{st.st_mtime_ns}:{st.st_size}")
    except (OSError, ValueError):
        return None
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "cachescope" / f"help-{zlib.crc32('|'.join(parts).encode()):08x}.txt"


def cached() -> str | None:
    """The kept root help, or None (not kept yet, or the sources changed)."""
    path = _path()
    try:
        return path.read_text() if path is not None else None
    except (OSError, UnicodeDecodeError):
        return None


def keep(text: str) -> None:
    """Keep the root help typer rendered (best effort: an unwritable cache only costs time)."""
    path = _path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        pass
