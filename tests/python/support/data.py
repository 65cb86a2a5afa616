"""The fixture files (records copied from public sources, named in each file's header) and the
shared/ folder beside the repository."""

from __future__ import annotations

from pathlib import Path

from cachescope.config import load_config
from ingest.pipeline import LineParser

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = TESTS / "fixtures"


def fixture_lines(name: str) -> list[str]:
    """Data lines of a fixture file (its '#' header lines name the sources)."""
    return [line for line in (FIXTURES / name).read_text().splitlines() if not line.startswith("#")]


def parse_lines(fmt: str, lines: list[str], **kwargs):
    kwargs.setdefault("config", load_config())
    parser = LineParser(fmt, **kwargs)
    events = parser.parse_all(lines)
    return events, parser.rejects, parser
