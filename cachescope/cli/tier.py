"""`cachescope tier PATH...` (or paths on stdin): one `TIER<TAB>PATH` line per path.

PATH is printed escaped so a line stays one line with one TAB: backslash as `\\`, TAB, NUL and the
other control characters as `\t`, `\x00` … Paths longer than PATH_MAX (4096 bytes, what POSIX
storage accepts) are refused with a message on stderr; the others are still printed; exit 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, Optional

import orjson
import typer

from cachescope.cli.app import app
from cachescope.config import load_config
from cachescope.tiers import RulesError, TierClassifier


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


@app.command("tier")
def tier(
    paths: Optional[list[str]] = typer.Argument(None, help="paths, URLs, LFNs, DIDs or dataset names; none or '-': read stdin"),
    rules: Optional[list[Path]] = typer.Option(None, "--rules", help="site tier-rules YAML (repeatable), after the config's"),
    config: Optional[Path] = typer.Option(None, "--config", help="cachescope YAML config (tiers.rules_files)"),
    vo: Optional[str] = typer.Option(None, "--vo", help="apply this VO's rules instead of detecting the VO"),
    details: bool = typer.Option(False, "--details", help="JSON lines with vo, normalised path, base tier, is_mc, pileup"),
) -> None:
    """Print the data tier of each path: TIER<TAB>PATH."""
    try:
        cfg = load_config(config)
        classifier = TierClassifier.load([*cfg.tiers.rules_files, *(rules or [])])
    except (RulesError, OSError, ValueError) as exc:
        typer.echo(f"cachescope tier: {exc}", err=True)
        raise typer.Exit(2) from None
    out = sys.stdout
    refused = 0
    try:
        for path in _paths(paths):
            size = len(path.encode("utf-8", "surrogatepass"))
            if size > PATH_MAX:
                refused += 1
                typer.echo(f"cachescope tier: path {escape(path[:60])}… is {size:,} bytes, longer than PATH_MAX "
                           f"({PATH_MAX}): refused", err=True)
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
        raise typer.Exit(1)
