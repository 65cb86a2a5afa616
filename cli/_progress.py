"""A progress bar on stderr for long work (stdout may be JSON), drawn only at a terminal."""

from __future__ import annotations


def with_progress(show: bool, what: str, work, total: int | None = None):
    """`work(tick)` under a progress bar on stderr (stdout may be the JSON): `tick(n)` advances by
    n of `total` rows or, with no total (a streamed trace's rows are known only at its end),
    `tick(fraction)` sets the share done."""
    if not show:
        return work(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TimeRemainingColumn

    done = MofNCompleteColumn() if total is not None else TaskProgressColumn()
    console = Console(stderr=True)
    # off a terminal rich draws no bar, only a stray newline before an error's one line
    with Progress("[progress.description]{task.description}", BarColumn(), done, TimeRemainingColumn(),
                  transient=True, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task(what, total=total if total is not None else 1.0)
        if total is not None:
            return work(lambda n: bar.advance(task, n))
        return work(lambda fraction: bar.update(task, completed=fraction))
