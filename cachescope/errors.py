"""Errors a user can act on: raised by library code, turned into one stderr line and an exit code
by the command line (cli.app), never a traceback.

Exit codes: 1 bad data, an unreadable or unwritable file, an unreachable server; 2 bad usage
(options, configuration); 130 / 143 interrupted by SIGINT / SIGTERM.
"""

from __future__ import annotations

EXIT_DATA = 1
EXIT_USAGE = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class UserError(Exception):
    """A problem with the user's input, files, options or servers; `str()` is the whole message.

    Every error a user can act on is one of these (tests/python/unit/test_errors.py enumerates them):
    the command line maps it to its exit code by type, never by name. `subject` ("store",
    "migration") is what the command line says before the message."""

    subject = ""

    def __init__(self, message: str, exit_code: int = EXIT_DATA):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(UserError):
    """A bad option or configuration value (exit 2)."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_USAGE)


class InputError(UserError):
    """A damaged input file: truncated or corrupt compressed data. `offset` is the byte offset in
    the file (compressed bytes) where reading stopped."""

    def __init__(self, source: str, offset: int, problem: str):
        self.source = source
        self.offset = offset
        self.problem = problem
        where = "" if problem.endswith(" from") else " at"
        super().__init__(f"{source}: {problem}{where} byte {offset:,}; the lines before it were read "
                         "(recompress or re-copy the file, then run again)")


__all__ = ["UserError", "UsageError", "InputError", "EXIT_DATA", "EXIT_USAGE", "EXIT_SIGINT", "EXIT_SIGTERM"]
