"""Shared fixtures and helpers: the shared/ folder beside the repository, fixture files (records
copied from public sources, named in each file's header)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachescope.config import load_config
from ingest.pipeline import LineParser

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "DESIGN.md").exists():
        pytest.fail(f"{SHARED} is missing: the tests need ../shared beside the repository")
    return SHARED


def fixture_lines(name: str) -> list[str]:
    """Data lines of a fixture file (its '#' header lines name the sources)."""
    return [line for line in (FIXTURES / name).read_text().splitlines() if not line.startswith("#")]


def parse_lines(fmt: str, lines: list[str], **kwargs):
    kwargs.setdefault("config", load_config())
    parser = LineParser(fmt, **kwargs)
    events = parser.parse_all(lines)
    return events, parser.rejects, parser


@pytest.fixture
def parse():
    return parse_lines


# --------------------------------------------------------------------------- real servers

def _services(*args: str) -> str:
    import subprocess

    out = subprocess.run(["bash", str(REPO / "scripts/services"), *args], capture_output=True, text=True)
    # `status` exits 3 for a stopped server (LSB init-script convention): an answer, not a failure
    if out.returncode != 0 and not (args[0] == "status" and out.returncode == 3):
        pytest.fail(f"scripts/services {' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return out.stdout


def _env(name: str) -> dict[str, str]:
    f = REPO / "var/services" / f"{name}.env"
    return dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line) if f.exists() else {}


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """A real Kafka broker (KRaft, Maven Central jars) on 127.0.0.1; stopped at the end if we started it."""
    already = "kafka: running" in _services("status", "kafka")
    if not already:
        _services("start", "kafka")
    yield _env("kafka")["KAFKA_BOOTSTRAP"]
    if not already:
        _services("stop", "kafka")
