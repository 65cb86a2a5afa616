"""One error hierarchy: every error a user can meet is a `UserError` (cachescope/errors.py), and the
command line maps errors to exit codes by type (1 bad data / unreachable server, 2 bad usage)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
import typer

from cachescope.errors import EXIT_DATA, EXIT_USAGE, UsageError, UserError

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("cachescope", "ingest", "runners", "api", "cli")

#: exceptions that never reach a user, each with the reason
INTERNAL = {
    "ingest.formats._base.BadRecord": "a field a parser cannot use: becomes a reject with its reason, processing goes on",
    "ingest.xrootd_monitoring.header.BadDatagram": "a datagram that does not decode: counted by kind, never raised out",
    "ingest.xrootd_monitoring.bus.BadMessage": "a bus message that is no shoveler message: a reject with its reason, "
                                               "counted and acked, never raised out",
    "runners.parse_streams.ParserStopped": "a parse child ended by a signal: the replay stops as on that signal",
    "api.errors.ApiError": "an HTTP error answer: the API turns it into a status and a JSON body",
    "api.metrics._TooBig": "control flow of the body-size limit: becomes a 413 answer",
}


def defined_exceptions() -> dict[str, type]:
    """Every exception class defined at the top level of a module of the packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            # a class named like an error or derived from one (StoreFull(StoreError), BadRecord(Exception))
            names = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
                     and any(re.search(r"(Error|Exception)$", t) for t in [n.name, *map(ast.unparse, n.bases)])]
            if not names:
                continue
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            module = ".".join(parts)
            mod = None
            for name in names:
                mod = mod or importlib.import_module(module)
                cls = getattr(mod, name)
                if isinstance(cls, type) and issubclass(cls, BaseException):
                    found[f"{module}.{name}"] = cls
    return found


def test_every_error_is_a_user_error_or_listed_as_internal():
    found = defined_exceptions()
    # the ones this hierarchy was made for are found (the walk works)
    for name in ("cachescope.store.base.StoreError", "cachescope.store.migrations.MigrationError",
                 "cachescope.units.SizeError", "cachescope.tiers.classifier.RulesError", "cachescope.specs.TraceError"):
        assert name in found
    outside = sorted(n for n, cls in found.items() if not issubclass(cls, UserError) and n not in INTERNAL)
    assert not outside, f"not UserError subclasses nor listed as internal: {outside}"
    assert not set(INTERNAL) - set(found), "an internal error listed here no longer exists"


def test_value_errors_stay_value_errors():
    """pydantic validators and callers catch these as ValueError: still one."""
    from api.core.config import SettingsError
    from cachescope.specs import TraceError
    from cachescope.tiers import RulesError
    from cachescope.units import SizeError
    from ingest.formats.dcache_billing import FormatError
    from ingest.formats.http_access import LogFormatError

    for cls in (SettingsError, TraceError, RulesError, SizeError, FormatError, LogFormatError):
        assert issubclass(cls, ValueError) and issubclass(cls, UserError)
    assert str(SizeError("size 'x' is not a size")) == "size 'x' is not a size"


def _run(exc: BaseException) -> tuple[int, str]:
    from cli.app import CachescopeGroup

    app = typer.Typer(cls=CachescopeGroup)

    @app.command()
    def fails() -> None:
        raise exc

    @app.command()
    def other() -> None:  # two commands: `fails` is then a subcommand, as in the real app
        pass

    import io
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        code = typer.main.get_command(app).main(["fails"], standalone_mode=False)
    return code, err.getvalue()


def _cases():
    from api.core.config import SettingsError
    from cachescope.specs import TraceError
    from cachescope.store.base import StoreError, StoreFull
    from cachescope.store.migrations import MigrationError
    from cachescope.tiers import RulesError
    from cachescope.units import SizeError
    from cachescope.xrdpfc import XrdPfcError
    from ingest.formats.http_access import LogFormatError

    return [
        (StoreError("Code: 60. Table x does not exist"), EXIT_DATA, "store: Code: 60"),
        (StoreFull("the disk of /data is full"), EXIT_DATA, "store: the disk of /data is full"),
        (MigrationError("store at version 9, this build knows 7"), EXIT_DATA, "migration: store at version 9"),
        (TraceError("trace.csv line 3: 2 fields, expected 4"), EXIT_DATA, "trace.csv line 3"),
        (XrdPfcError("pfc.blocksize: not a size"), EXIT_DATA, "pfc.blocksize"),
        (SizeError("size '10XB' is not a size"), EXIT_USAGE, "size '10XB'"),
        (RulesError("rules.yaml: no tiers"), EXIT_USAGE, "rules.yaml"),
        (LogFormatError("LogFormat '%h' has no %t (time)"), EXIT_USAGE, "has no %t"),
        (SettingsError("give exactly one of --store DIR or --clickhouse URL"), EXIT_USAGE, "exactly one"),
        (UsageError("--size: empty"), EXIT_USAGE, "--size: empty"),
    ]


@pytest.mark.parametrize("index", range(10))
def test_the_command_line_maps_errors_to_exit_codes_by_type(index):
    exc, code, words = _cases()[index]
    got, err = _run(exc)
    assert got == code, err
    assert err.count("\n") == 1, err
    assert words in err and "internal error" not in err and "Traceback" not in err


def test_a_new_user_error_needs_no_cli_change():
    class ShardsError(UsageError):
        subject = "shards"

    code, err = _run(ShardsError("4 shards, 3 servers"))
    assert code == EXIT_USAGE and "shards: 4 shards, 3 servers" in err


def test_the_command_line_names_no_error_class_of_ours():
    """Mapped by type (UserError.exit_code, .subject), never by a class or module name in a string."""
    names = {cls.__name__ for cls in defined_exceptions().values()} | {"UserError", "UsageError", "InputError"}
    for path in sorted((REPO / "cli").glob("*.py")):
        text = path.read_text()
        assert "__module__" not in text, path
        quoted = [n for n in names if re.search(rf"[\"']{n}[\"']", text)]
        assert not quoted, f"{path.name} names {quoted} in a string"
