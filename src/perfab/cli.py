"""The ``perfab`` command line: one parser built from the commands, and the one place errors become lines.

Each subcommand is one object in ``perfab.commands`` (its name, help,
arguments and action); ``perfab run SPEC`` is the whole pipeline
(``perfab.commands.run``).  ``main`` parses ``argv``, calls the chosen
command's ``run``, and turns a library error into one line on stderr and a
non-zero exit (2 for usage errors).  It takes argv and streams, so tests
call it directly.
"""

from __future__ import annotations

import argparse
import sys

from perfab.commands import COMMANDS, Command
from perfab.errors import PerfabError, UsageError
from perfab.terminal import help_formatter

TYPE_CHECKING = False  # typing costs milliseconds of start-up; annotations are never evaluated
if TYPE_CHECKING:
    from typing import TextIO

BY_NAME = {c.name: c for c in COMMANDS}


class _Parser(argparse.ArgumentParser):
    """argparse that reports through ``main``: a usage error raises, ``--help`` returns instead of exiting."""

    def error(self, message: str):
        raise UsageError(f"{message}; see `{self.prog} --help`")

    def exit(self, status: int = 0, message: str | None = None):
        raise _HelpShown(status)


class _HelpShown(Exception):
    """``--help`` was printed: ``main`` returns the status instead of the process exiting."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status  # the exit status argparse asked for (0 after help)


class _CommandParser(_Parser):
    """A subcommand's parser: an argument it does not know is its error, pointing at its own ``--help``
    (argparse leaves it to the top parser, whose hint would be ``perfab --help``)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``command``, only that subcommand's arguments are filled in.

    Every subcommand is listed (name and help) unless ``command`` names one,
    so ``perfab --help`` and an unknown command's error read the same; a
    named command gets its own parser alone, filled: each parser costs
    start-up (``report``'s options import the spec schema; 13 empty ones
    took a quarter of ``perfab list``'s own time).
    """
    p = _Parser(prog="perfab", description="A/B performance experiments with verdicts you can defend.",
                formatter_class=help_formatter())
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for c in COMMANDS:
        if command in BY_NAME and c.name != command:
            continue
        sp = sub.add_parser(c.name, help=c.help, description=c.description, formatter_class=p.formatter_class)
        if command is None or command == c.name:
            c.add_arguments(sp)
    return p


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    command = BY_NAME.get(_command_in(argv), Command())  # how its errors read, even those of parsing
    args = None
    try:
        args = _parse(argv, stdout)
        if not args.command:
            build_parser("").print_help(stdout)
            return 2
        return command.run(args, stdout, stderr)
    except _HelpShown as shown:
        return shown.status
    except PerfabError as e:
        print(command.error_line(e), file=stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(command.interrupted_line(args), file=stderr)
        return 130


def _parse(argv: list[str], stdout: TextIO) -> argparse.Namespace:
    """Parse ``argv``; --help prints to ``stdout`` (contextlib.redirect_stdout, without importing contextlib)."""
    saved, sys.stdout = sys.stdout, stdout
    try:
        return build_parser(_command_in(argv)).parse_args(argv)
    finally:
        sys.stdout = saved


def _command_in(argv: list[str]) -> str:
    """The subcommand ``argv`` names: its first word that is not an option ('' when none)."""
    return next((a for a in argv if not a.startswith("-")), "")


def main_entry() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `perfab report | head`
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    main_entry()
