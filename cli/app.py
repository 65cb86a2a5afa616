"""The typer application every command module registers on, and the one place where errors become
one stderr line and an exit code (1 bad data / unreachable server, 2 bad usage; see errors.py)."""

from __future__ import annotations

import errno
import sys

from typer._click import exceptions as cx  # typer vendors click: its exceptions are these
import typer
from typer.core import TyperGroup

from cachescope.errors import EXIT_DATA, EXIT_SIGINT, EXIT_USAGE, UserError


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


#: (module, exception class, message): errors of the servers' client libraries, which cannot
#: subclass UserError (ours all do); looked up only in modules already imported, so `--help`
#: stays light
_CLIENT_ERRORS = (
    ("kafka.errors", "KafkaError", "Kafka: {kind}: {exc} (is the broker running and reachable?)"),
    ("clickhouse_driver.errors", "Error", "ClickHouse: {exc} (is the server running and reachable?)"),
)


def _client_error(exc: BaseException) -> str | None:
    """The message of a server client library's error (an unreachable server: exit 1)."""
    for module, cls, message in _CLIENT_ERRORS:
        mod = sys.modules.get(module)
        err = getattr(mod, cls, None) if mod is not None else None
        if err is not None and isinstance(exc, err):
            return message.format(exc=exc, kind=type(exc).__name__)
    return None


def user_message(exc: UserError) -> str:
    """What the command line says of a UserError, after `cachescope CMD: `."""
    return _one_line(f"{exc.subject}: {exc.message}" if exc.subject else exc.message)


class CachescopeGroup(TyperGroup):
    """Runs a command and turns every error into one line `cachescope CMD: message` on stderr."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        command = next((a for a in argv if a in self.commands), "")
        sub = getattr(self.commands.get(command), "commands", None)  # a group: `bench accuracy`
        if sub:
            after = argv[argv.index(command) + 1:]
            command = " ".join([command, *[a for a in after if a in sub][:1]])
        prefix = self._prefix = f"cachescope {command}".strip()
        try:
            rv = super().main(argv, prog_name or "cachescope", complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
        except typer.Exit as exc:
            code = exc.exit_code
        except cx.NoArgsIsHelpError as exc:
            typer.echo(exc.format_message(), err=True)
            code = EXIT_USAGE
        except cx.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else prefix
            hint = f" (see `{where} --help`)" if exc.ctx is not None else ""
            message = exc.format_message()
            typer.echo(f"{where}: {_one_line(message)}{hint}", err=True)
            code = EXIT_USAGE
        except cx.ClickException as exc:
            typer.echo(f"{prefix}: {_one_line(exc.format_message())}", err=True)
            code = exc.exit_code
        except typer.Abort as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, EOFError):  # a truncated gzip stream seen by code that did not wrap it
                typer.echo(f"{prefix}: input ended early: {_one_line(str(cause))}", err=True)
                code = EXIT_DATA
            else:
                typer.echo(f"{prefix}: interrupted", err=True)
                code = EXIT_SIGINT
        except UserError as exc:  # every error of ours a user can act on: its type gives the code
            typer.echo(f"{prefix}: {user_message(exc)}", err=True)
            code = exc.exit_code
        except KeyboardInterrupt:
            typer.echo(f"{prefix}: interrupted", err=True)
            code = EXIT_SIGINT
        except RecursionError as exc:
            typer.echo(f"{prefix}: input nested too deeply ({exc})", err=True)
            code = EXIT_DATA
        except MemoryError:
            typer.echo(f"{prefix}: out of memory (use a smaller input or fewer caches)", err=True)
            code = EXIT_DATA
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # `cachescope parse … | head`
                code = 0
            else:
                what = f"{exc.filename}: " if exc.filename else ""
                typer.echo(f"{prefix}: {what}{exc.strerror or _one_line(str(exc))}", err=True)
                code = EXIT_DATA
        except Exception as exc:  # noqa: BLE001 - the last guard: still one line, never a traceback
            known = _client_error(exc)
            if known is not None:
                typer.echo(f"{prefix}: {_one_line(known)}", err=True)
                code = EXIT_DATA
            else:
                typer.echo(f"{prefix}: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
                           "(a bug: please report it with the command line)", err=True)
                code = EXIT_DATA
        if not standalone_mode:
            return code
        sys.exit(code)

    def invoke(self, ctx):  # type: ignore[override]
        # typer turns Ctrl-C into a silent exit 130 before `main` sees it: say it here
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            typer.echo(f"{getattr(self, '_prefix', 'cachescope')}: interrupted", err=True)
            raise typer.Exit(EXIT_SIGINT) from None


app = typer.Typer(
    name="cachescope",
    cls=CachescopeGroup,
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
