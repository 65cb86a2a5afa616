"""`cachescope` command line: one module per command group, all registered on one typer app.

Start-up time is part of the contract (`cachescope --help`, `cachescope tier` ≤ 0.15 s), so
`main` imports only the module of the command being run, and command modules import their
heavy dependencies (numpy, pandas, the engine, Kafka clients) inside the command. `--help` (or
no command) imports every command module, which costs little for that reason; the root
`--help` prints typer's text as kept after its first rendering (`_help_cache`: typer's own
import and app building are ~0.1 s).
"""

from __future__ import annotations

import importlib

# command name -> module that registers it
COMMANDS = {
    "bench": "bench",
    "collect": "collect",
    "generate": "generate",
    "migrate": "migrate",
    "monitor": "monitor",
    "parse": "parse",
    "replay": "replay",
    "report": "report",
    "serve": "serve",
    "ship": "ship",
    "simulate": "simulate",
    "tier": "tier",
    "whatif": "whatif",
}


def _load(modules) -> object:
    for module in modules:
        importlib.import_module(f"cli.{module}")
    from cli.app import app

    return app


def __getattr__(name: str):
    # `from cli import app`: the app with every command (tests, embedding)
    if name == "app":
        app = _load(sorted(set(COMMANDS.values())))
        globals()["app"] = app
        return app
    raise AttributeError(name)


def main() -> None:
    import os
    import sys

    # numpy's OpenBLAS starts a worker per core that spins at import; cachescope does no large
    # linear algebra, so one thread: ~0.1 s less CPU per command (a sweep runs thousands)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

    # the first word that is not an option names the command (the root has no options with values)
    name = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if name == "tier" and sys.argv[1] == "tier" and "--help" not in sys.argv[2:]:
        from cli._tier_run import fast_main

        return fast_main(sys.argv[2:])
    if sys.argv[1:] == ["--help"]:
        return _root_help()
    module = COMMANDS.get(name or "")
    app = _load([module] if module else sorted(set(COMMANDS.values())))
    code = app(standalone_mode=False)
    if code == 0 and module in _NO_TEARDOWN:
        # the store is closed and every file written by now; freeing a replay's gigabytes of
        # arrays and chdb's engine object by object would add ~0.5 s that nobody waits for
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader that went away (`… | head`): nothing to lose
                pass
        os._exit(0)
    sys.exit(code)


def _root_help() -> None:
    """`cachescope --help`: typer's text, kept after the first rendering (see _help_cache)."""
    import contextlib
    import io
    import sys

    from cli import _help_cache

    text = _help_cache.cached()
    if text is None:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = _load(sorted(set(COMMANDS.values())))(standalone_mode=False)
        text = out.getvalue()
        if code not in (0, None):
            sys.stdout.write(text)
            sys.exit(code)
        _help_cache.keep(text)
    sys.stdout.write(text)


#: commands that end without Python's teardown when they succeed
_NO_TEARDOWN = {"replay"}
