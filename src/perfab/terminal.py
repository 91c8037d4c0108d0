"""The width argparse lays help out to, found without importing shutil.

argparse asks ``shutil.get_terminal_size()`` for it, and importing shutil
loads bz2, lzma, zlib and fnmatch: about a fifth of ``perfab --help``'s
start-up.  ``help_formatter`` gives argparse the same width up front.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys


def columns(fallback: int = 80) -> int:
    """Terminal columns as ``shutil.get_terminal_size`` finds them: $COLUMNS, then stdout's terminal, then ``fallback``."""
    try:
        found = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        found = 0
    if found <= 0:
        try:
            found = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            found = 0
    return found or fallback


def help_formatter(cls: type[argparse.HelpFormatter] = argparse.HelpFormatter):
    """``cls`` with argparse's own default width (the terminal's columns less 2) already given."""
    return functools.partial(cls, width=columns() - 2)
