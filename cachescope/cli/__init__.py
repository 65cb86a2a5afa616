"""`cachescope` command line: one module per command group, all registered on one typer app."""

from cachescope.cli.app import app

# Each module registers its commands on `app` when imported.
from cachescope.cli import bench, generate, migrate, parse, replay, report, serve, ship, simulate, tier  # noqa: F401,E402


def main() -> None:
    app()
