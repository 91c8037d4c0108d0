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
it did so (``environment["layout"]``).  With ``layout = "random"`` each run
also gets ``random_extra`` more bytes, drawn per run from the experiment's
seed: the stack then starts at a different offset in every run, alike on
every side, and a verdict holds over layouts instead of at one.
"""

from __future__ import annotations

import os
import random
import shutil
from typing import Callable

from perfab.errors import PerfabError
from perfab.specfile import Variant, Workload, expand

PAD_VAR = "PERFAB_LAYOUT_PAD"
HEADROOM = 64  # bytes of padding the longest side still gets: the variable is always there, at one offset
LAYOUT = f"argv, environment and program path padded to equal bytes on every side ({PAD_VAR})"
RANDOM_MAX = 4095  # most extra bytes a run gets with layout = "random": the stack's offset within a page


def describe(layout: str) -> str:
    """What the session's environment records of its padding."""
    return LAYOUT if layout != "random" else f"{LAYOUT}, plus 0..{RANDOM_MAX} random bytes per run"


def random_extra(seed: int, seq: int) -> int:
    """The extra bytes of run ``seq`` with layout = "random": uniform on 0..RANDOM_MAX, the same draw on resume."""
    return random.Random(f"perfab-layout:{seed}:{seq}").randrange(RANDOM_MAX + 1)


def with_extra(env: dict[str, str], extra: int) -> dict[str, str]:
    """``env`` with ``extra`` more bytes of padding."""
    return {**env, PAD_VAR: env.get(PAD_VAR, "") + "." * extra}


def string_bytes(argv: list[str], env: dict[str, str], cwd: str | None) -> int:
    """Bytes of the strings exec puts on a new stack: argv, ``NAME=value`` pairs and the program's path."""
    total = sum(len(os.fsencode(a)) + 1 for a in argv)
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


def slots(count: int) -> dict[str, str]:
    """``count`` empty variables: a side with fewer variables gets as many argv/envp slots as the others."""
    return {f"{PAD_VAR}_{i}": "" for i in range(count)}


class Padding:
    """Each run's padded environment: every side at a (workload, sweep point) gets the same number of argv and
    environment entries (``slots``) and the same string bytes (``PAD_VAR``), so the stack starts alike even
    after the kernel's 16-byte rounding of strings and pointers."""

    def __init__(self, variants: tuple[Variant, ...]):
        self.variants = variants
        self._widest: dict[tuple, tuple[int, int]] = {}  # (workload, sweep point) -> (entries, string bytes)
        self._padded: dict[tuple, dict[str, str]] = {}  # (side, workload, sweep point, cwd) -> padded environment

    def env(self, variant: Variant, workload: Workload, params: tuple, cwd: str | None,
            values_of: Callable[[Variant], dict], env_of: Callable[[Variant], dict], build: int = 0) -> dict[str, str]:
        """``variant``'s environment for a run of ``workload`` at ``params`` (on layout build ``build``), padded to
        the widest side.

        The same for every run of one cell (its placeholders and environment do not change within a
        session), so it is worked out once per cell and handed out again: no run pays for the count."""
        key = (variant.name, workload.name, params, cwd, build)
        padded = self._padded.get(key)
        if padded is None:
            padded = self._padded[key] = self._pad(variant, workload, params, cwd, values_of, env_of, build)
        return padded

    def _pad(self, variant: Variant, workload: Workload, params: tuple, cwd: str | None,
             values_of: Callable[[Variant], dict], env_of: Callable[[Variant], dict], build: int) -> dict[str, str]:
        """The padded environment of one cell (see ``env``)."""
        def shape(v: Variant, extra: int = 0) -> tuple[int, int] | None:
            try:
                argv = [expand(a, values_of(v)) for a in workload.argv]
            except PerfabError:  # a side this session does not run or build ({build} of another boot)
                return None
            argv = ["/bin/sh", "-c", *argv] if workload.shell else argv
            env = {**env_of(v), **slots(extra)}
            return len(argv) + len([k for k in env if k != PAD_VAR]), string_bytes(argv, env, cwd)

        key = (workload.name, params, build)
        if key not in self._widest:
            shapes = {v.name: s for v in self.variants if (s := shape(v)) is not None}
            entries = max([e for e, _ in shapes.values()] + [0])
            widest = max([shape(v, entries - shapes[v.name][0])[1] for v in self.variants if v.name in shapes] + [0])
            self._widest[key] = (entries, widest)
        entries, widest = self._widest[key]
        own = shape(variant)
        if own is None:
            return pad_env(env_of(variant), 0, widest)
        extra = max(0, entries - own[0])
        env = {**env_of(variant), **slots(extra)}
        own_bytes = own[1] + string_bytes([], slots(extra), cwd)
        return pad_env(env, own_bytes, max(widest, own_bytes))
