"""What a ``perfab`` subcommand is: one object holding its name, its help, its arguments and its action.

``perfab.cli`` builds one argument parser from the list of these
(``perfab.commands.COMMANDS``) and calls the chosen one's ``run``.  A
command is a plain class, not a dataclass: ``dataclasses`` (with
``inspect``) would cost ``perfab list`` a few milliseconds of start-up
before any command is chosen.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds of start-up; annotations are never evaluated
if TYPE_CHECKING:
    from argparse import ArgumentParser, Namespace
    from typing import TextIO

    from perfab.errors import PerfabError

DEFAULT_DB = ".perfab/results.db"


class Command:
    """One subcommand; a subclass sets the three attributes and defines ``add_arguments`` and ``run``.

    ``run`` imports the library it calls when it is called, so the parser of
    every command costs only its own arguments.
    """

    name = ""  # the word after ``perfab``
    help = ""  # its line in ``perfab --help``
    description: str | None = None  # the paragraph under the usage line of its own --help (None: no paragraph)

    def add_arguments(self, parser: ArgumentParser) -> None:
        """Its arguments and options, added to ``parser`` (its own subparser); none by default."""

    def run(self, args: Namespace, stdout: TextIO, stderr: TextIO) -> int:
        """Do it; the exit status.  A ``PerfabError`` raised here reaches the user as ``error_line``."""
        raise NotImplementedError(self.name)

    def error_line(self, error: PerfabError) -> str:
        """The one line a failure of this command prints on stderr."""
        return f"perfab: {error}"

    def interrupted_line(self, args: Namespace | None) -> str:
        """The line printed when Ctrl-C stops this command (``args`` is None when it came during parsing)."""
        return "perfab: interrupted; stored runs are kept (continue with perfab run SPEC --resume)"


def add_db(p: ArgumentParser) -> None:
    """``--db``: the results database a command reads or writes."""
    p.add_argument("--db", default=DEFAULT_DB,
                   help=f"results database: a file (default {DEFAULT_DB}) or a postgresql://user@host/dbname URL")


def add_report_options(p: ArgumentParser) -> None:
    """The options of a command that prints the comparison (``run`` and ``report``)."""
    from perfab.report.kinds import FORMATS
    from perfab.specfile.schema import METHODS  # imported when a command that reports is chosen

    p.add_argument("--format", default="text", choices=list(FORMATS))
    p.add_argument("--alpha", type=float, help="significance level after FDR control (default: the spec's, 0.05)")
    p.add_argument("--confidence", type=float, help="confidence level of intervals (default: the spec's, 0.95)")
    p.add_argument("--method", choices=list(METHODS), help="override every row's method")
    p.add_argument("--all", action="store_true", dest="show_all",
                   help="also show parser metrics that have no declared direction")
    p.add_argument("--absolute", action="store_true",
                   help="with three or more sides, show each side's median instead of %% of the baseline")
    p.add_argument("--verbose", action="store_true",
                   help="text: print every note under a table and every warning, none folded or counted")
