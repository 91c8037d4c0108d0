"""``--help`` for ``perfab`` and every subcommand found in its parser: exit 0, a usage line, no traceback.

Regression: ``perfab run --help`` and ``perfab report --help`` crashed with ``TypeError: %o format``
because a help string held a bare ``%`` (argparse formats help with ``%``). The subcommands are read
from the parser, so a new one is covered without editing this file.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from core_helpers import REPO, cli
from perfab.cli import build_parser


def _subcommands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``parser`` (nested subparsers included), e.g. ("run",)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(prefix + (name,))
                found.extend(_subcommands(sub, prefix + (name,)))
    return found


SUBCOMMANDS = _subcommands(build_parser())


def test_the_parser_has_the_documented_subcommands():
    names = {path[0] for path in SUBCOMMANDS}
    assert {"run", "report", "plan", "bisect", "size"} <= names


def test_top_level_help_exits_0_with_usage():
    code, out, err = cli("--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: perfab ")
    for path in SUBCOMMANDS:
        assert path[0] in out


@pytest.mark.parametrize("path", SUBCOMMANDS, ids=" ".join)
def test_subcommand_help_exits_0_with_usage(path):
    code, out, err = cli(*path, "--help")
    assert (code, err) == (0, ""), err
    assert out.startswith(f"usage: perfab {' '.join(path)} ")
    assert len(out.splitlines()) > 2


@pytest.mark.parametrize("path", [(), ("run",), ("report",)], ids=lambda p: " ".join(p) or "perfab")
def test_help_from_the_command_line_exits_0(path):
    """The real entry point, in a process of its own: help goes to stdout and the process exits 0."""
    done = subprocess.run([sys.executable, "-m", "perfab.cli", *path, "--help"], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("usage: perfab")


def test_a_usage_error_is_still_one_line_and_exit_2():
    code, out, err = cli("run", "spec.toml", "--no-such-flag")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--no-such-flag" in err


@pytest.mark.parametrize("path", SUBCOMMANDS, ids=" ".join)
def test_an_unknown_option_points_at_its_commands_help(path):
    """argparse leaves a subcommand's unknown option to the top parser, whose hint was `perfab --help`."""
    code, out, err = cli(*path, "--no-such-flag", "x", "y")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.rstrip().endswith(f"see `perfab {' '.join(path)} --help`"), err
