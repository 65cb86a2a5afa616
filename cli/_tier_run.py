"""The work of `cachescope tier`, and its fast path: `main` runs it without typer when the
command line is `cachescope tier …` (typer's import and pydantic-backed argument parsing cost
more than the 0.15 s start-up budget). The options are the typer command's (cli/tier.py); a
test runs both paths on the same arguments.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, Optional


#: Linux PATH_MAX; XRootD, dCache and EOS refuse longer paths too
PATH_MAX = 4096
_ESCAPES = {i: f"\\x{i:02x}" for i in [*range(0x20), 0x7F]} | {ord("\\"): "\\\\", ord("\t"): "\\t",
                                                             ord("\n"): "\\n", ord("\r"): "\\r"}


def escape(path: str) -> str:
    """PATH as printed: no TAB, newline or NUL left raw in the TIER<TAB>PATH line."""
    return path.translate(_ESCAPES)


def _paths(args: list[str] | None) -> Iterable[str]:
    if args and args != ["-"]:
        yield from args
        return
    for line in sys.stdin:
        path = line.rstrip("\r\n")
        if path.strip():
            yield path


def _exit(code: int):
    raise SystemExit(code)


def run(paths: Optional[list[str]], rules: Optional[list[Path]], config: Optional[Path], vo: Optional[str],
        details: bool) -> None:
    import os

    from cachescope.tiers import RulesError, TierClassifier

    try:
        # the full configuration (pydantic-settings) only when a file or CACHESCOPE_* variable
        # can add rules files: start-up time is part of this command's contract
        if config is not None or any(k.startswith("CACHESCOPE_") for k in os.environ):
            from cachescope.config import load_config

            site_rules = load_config(config).tiers.rules_files
        else:
            site_rules = []
        classifier = TierClassifier.load([*site_rules, *(rules or [])])
    except (RulesError, OSError, ValueError) as exc:
        print(f"cachescope tier: {exc}", file=sys.stderr)
        _exit(2)
    out = sys.stdout
    if details:
        import orjson
    refused = 0
    try:
        for path in _paths(paths):
            size = len(path.encode("utf-8", "surrogatepass"))
            if size > PATH_MAX:
                refused += 1
                print(f"cachescope tier: path {escape(path[:60])}… is {size:,} bytes, longer than PATH_MAX "
                      f"({PATH_MAX}): refused", file=sys.stderr)
                continue
            info = classifier.classify(path, vo)
            if details:
                out.write(
                    orjson.dumps(
                        {
                            "input": path,
                            "tier": info.tier,
                            "base_tier": info.base_tier,
                            "vo": info.vo,
                            "is_mc": info.is_mc,
                            "pileup": info.pileup,
                            "path": info.path,
                            "rule": info.rule,
                            "scope": info.scope,
                            "rucio_hash_ok": info.rucio_hash_ok,
                        }
                    ).decode()
                    + "\n"
                )
            else:
                out.write(f"{info.tier}\t{escape(path)}\n")
        out.flush()
    except BrokenPipeError:
        sys.stderr.close()
        return
    if refused:
        _exit(1)


def fast_main(argv: list[str]) -> None:
    """`cachescope tier` parsed with argparse (same options as the typer command)."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # one line, exit 2 (bad usage), like the other commands
            print(f"cachescope tier: {message}", file=sys.stderr)
            raise SystemExit(2)

    p = Parser(prog="cachescope tier", add_help=False)
    p.add_argument("paths", nargs="*")
    p.add_argument("--rules", action="append", type=Path)
    p.add_argument("--config", type=Path)
    p.add_argument("--vo")
    p.add_argument("--details", action="store_true")
    a = p.parse_args(argv)
    run(a.paths or None, a.rules, a.config, a.vo, a.details)
