"""`cachescope tier PATH...` (or paths on stdin): one `TIER<TAB>PATH` line per path."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.app import app


@app.command("tier")
def tier(
    paths: Optional[list[str]] = typer.Argument(None, help="paths, URLs, LFNs, DIDs or dataset names; none or '-': read stdin"),
    rules: Optional[list[Path]] = typer.Option(None, "--rules", help="site tier-rules YAML (repeatable), after the config's"),
    config: Optional[Path] = typer.Option(None, "--config", help="cachescope YAML config (tiers.rules_files)"),
    vo: Optional[str] = typer.Option(None, "--vo", help="apply this VO's rules instead of detecting the VO"),
    details: bool = typer.Option(False, "--details", help="JSON lines with vo, normalised path, base tier, is_mc, pileup"),
) -> None:
    """Print the data tier of each path: TIER<TAB>PATH."""
    from cli._tier_run import run

    run(paths, rules, config, vo, details)
