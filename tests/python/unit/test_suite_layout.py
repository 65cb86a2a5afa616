"""The two tiers hold: nothing under tests/python/integration/ runs without the `integration` mark,
and under tests/python/unit/ the only tests that need a server are the `store` fixture's
ClickHouse-server cases of tests that run on chDB too (`scripts/test --fast` leaves them out)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parents[1]


def collected(*args: str) -> list[str]:
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode in (0, 5), p.stdout[-3000:] + p.stderr[-3000:]  # 5: nothing collected
    return [line for line in p.stdout.splitlines() if "::" in line]


def test_every_integration_test_is_marked():
    assert collected(str(TESTS / "integration"), "-m", "not integration") == []
    assert collected(str(TESTS / "integration"), "-m", "integration")


def test_unit_tests_need_no_server_but_the_store_fixtures_server_case():
    needing = collected(str(TESTS / "unit"), "-m", "integration")
    assert needing, "the store fixture's server cases are marked integration"
    assert [t for t in needing if "server" not in t.rpartition("[")[2].rstrip("]").split("-")] == []
