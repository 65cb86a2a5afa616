"""The typer application every command module registers on."""

import typer

app = typer.Typer(
    name="cachescope",
    help="Shadow-cache analytics for grid storage: hit and transfer efficiency by data tier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help: rich's import alone costs more than the 0.15 s start-up budget
    rich_markup_mode=None,
)


@app.callback()
def _root() -> None:
    """cachescope: replay grid storage access logs through shadow caches."""
