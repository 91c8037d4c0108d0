"""The terminal: the width argparse lays help out to, and text made safe to print on it.

argparse asks ``shutil.get_terminal_size()`` for its width, and importing
shutil loads bz2, lzma, zlib and fnmatch: about a fifth of ``perfab
--help``'s start-up.  ``help_formatter`` gives argparse the same width up
front.

Text from workloads, labels and commit subjects is printed through
``visible``: control characters (C0 but tab and newline, DEL, and the C1
range that holds CSI, ``\\x9b``) are shown as ``\\xNN``, so an ANSI escape
in a workload's output or a label cannot move the cursor or recolour a report.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys


def columns(fallback: int = 80) -> int:
    """Terminal columns as ``shutil.get_terminal_size`` finds them: $COLUMNS, then stdout's terminal,
    then ``fallback``."""
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


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what ``visible`` shows escaped


def visible(text: str) -> str:
    """``text`` with each control character shown as ``\\xNN``."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
