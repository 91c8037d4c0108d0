"""Errors that reach the user as one line: the cause and the fix.

Library code raises these; ``perfab.cli`` prints ``perfab: <message>`` and
exits with ``exit_code``.  Anything else escaping is a bug in perfab.
"""

from __future__ import annotations


class PerfabError(Exception):
    """A failure the user can act on; ``str(err)`` names the cause and the fix."""

    exit_code = 1


class UsageError(PerfabError):
    """Bad input: a spec, a flag, a name that does not exist (exit code 2)."""

    exit_code = 2


class SpecError(UsageError):
    """An experiment spec that cannot be used; the message names file and key."""


class StoreError(PerfabError):
    """A results database that cannot be read or written safely."""


class ToolError(PerfabError):
    """An external tool (perf, valgrind, a compiler) that is missing or failed."""
