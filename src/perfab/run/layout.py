"""Equal memory layout for every side: the same bytes of argv and environment, padded.

A process's initial stack holds its argv and environment strings and the
path it was executed by; their total size shifts where the stack, and so
every stack variable, starts.  Two sides whose commands differ only in a
path's length (``./build/inline/prog`` and ``./build/outline/prog``) or in
an environment variable can differ by that alignment alone (Mytkowicz et
al., "Producing wrong data without doing anything obviously wrong!",
ASPLOS 2009).  ``pad_env`` gives each run the environment variable
``PERFAB_LAYOUT_PAD`` sized so that every side's workload starts with the
same number of string bytes at each sweep point; the session records that
it did so (``environment["layout"]``).
"""

from __future__ import annotations

import os
import shutil
from typing import Callable

from perfab.errors import PerfabError
from perfab.spec import Variant, Workload, expand

PAD_VAR = "PERFAB_LAYOUT_PAD"
HEADROOM = 64  # bytes of padding the longest side still gets: the variable is always there, at one offset
LAYOUT = f"argv, environment and program path padded to equal bytes on every side ({PAD_VAR})"


POINTER = 8  # bytes of each argv and envp slot on a 64-bit stack


def string_bytes(argv: list[str], env: dict[str, str], cwd: str | None) -> int:
    """Bytes exec puts on a new stack for argv, ``NAME=value`` pairs and the program's path: the strings and
    a pointer per argv and envp entry (a side with one more variable has one more slot to make up for)."""
    entries = len(argv) + len([k for k in env if k != PAD_VAR])
    total = POINTER * entries + sum(len(os.fsencode(a)) + 1 for a in argv)
    total += sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items() if k != PAD_VAR)
    return total + len(os.fsencode(_program_path(argv[0], env, cwd))) + 1 if argv else total


def pad_env(env: dict[str, str], own: int, widest: int) -> dict[str, str]:
    """``env`` with ``PAD_VAR`` sized so that a side needing ``own`` bytes reaches ``widest`` plus headroom."""
    return {**env, PAD_VAR: "." * (widest - own + HEADROOM)}


def _program_path(program: str, env: dict[str, str], cwd: str | None) -> str:
    """The path exec is given for ``program``: as written with a ``/``, else found on the side's PATH."""
    if "/" in program:
        return program
    return shutil.which(program, path=env.get("PATH", os.defpath)) or program


class Padding:
    """Each run's padded environment, with the widest side's string bytes kept per (workload, sweep point)."""

    def __init__(self, variants: tuple[Variant, ...]):
        self.variants = variants
        self._widest: dict[tuple, int] = {}  # (workload, sweep point) -> string bytes of its widest side

    def env(self, variant: Variant, workload: Workload, params: tuple, cwd: str | None,
            values_of: Callable[[Variant], dict], env_of: Callable[[Variant], dict]) -> dict[str, str]:
        """``variant``'s environment for a run of ``workload`` at ``params``, padded to the widest side."""
        def need(v: Variant) -> int | None:
            try:
                argv = [expand(a, values_of(v)) for a in workload.argv]
            except PerfabError:  # a side this session does not run or build ({build} of another boot)
                return None
            return string_bytes(["/bin/sh", "-c", *argv] if workload.shell else argv, env_of(v), cwd)

        key = (workload.name, params)
        own = need(variant) or 0
        if key not in self._widest:
            self._widest[key] = max([own] + [n for v in self.variants if (n := need(v)) is not None])
        return pad_env(env_of(variant), own, max(own, self._widest[key]))
