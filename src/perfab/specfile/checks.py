"""Checks of single spec values that need more than a type: names, refs, regexes, rows, sweeps and runs.

Each is a small named function (or a ``Kind`` of its own) that the schema
attaches to a key; each refuses in one line naming the key and the fix.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

from perfab.errors import SpecError, UsageError
from perfab.specfile.kinds import At, Integer, Kind, typed

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}")
RESERVED = frozenset({"variant", "workload", "experiment", "metric", "value", "run_id", "seq", "warmup", "src",
                      "build"})  # placeholders perfab defines itself
_KCONFIG = re.compile(r"[A-Z0-9_]+")
MAX_PERCENT = 10_000  # "N%" sweep values: at most 100 times the online CPUs
MAX_SWEEP_POINTS = 1_000  # points of one workload's parameter grid
AUTO = "auto"  # runs = "auto": a sequential experiment


def env_name(name: str, at: At) -> None:
    """An environment variable name: not empty, no ``=``."""
    if not name or "=" in name:
        raise at.fail(f"{name!r} is not an environment variable name", "use a non-empty name without '='")


def placeholder_name(name: str, at: At) -> None:
    """A side's own placeholder: an identifier perfab does not define itself."""
    if not IDENT.fullmatch(name) or name in RESERVED:
        raise at.child(name).fail("is not a usable placeholder name",
                                  "use letters, digits and '_', starting with a letter "
                                  f"(not {', '.join(sorted(RESERVED))})")


def kconfig_name(name: str, at: At) -> None:
    """A kernel config option, with or without ``CONFIG_``."""
    if not _KCONFIG.fullmatch(name.removeprefix("CONFIG_")):
        raise at.child(name).fail("is not a kernel config option name",
                                  'write it as in Kconfig, e.g. PARAVIRT_SPINLOCKS = "n"')


def regex(value: str, at: At) -> str:
    """A Python regular expression that compiles."""
    try:
        re.compile(value)
    except re.error as e:
        raise at.fail(f"bad regex ({e})", "fix the pattern") from None
    return value


def git_ref(value: str, at: At) -> str:
    """A git ref that cannot be taken for an option or be blank."""
    if not value.strip() or value.startswith("-"):
        raise at.fail(f"{value!r} is not a git ref", 'name a branch, tag or commit, e.g. "v6.1"')
    return value


def workload_level(commands: tuple[str, ...], at: At) -> tuple[str, ...]:
    """A workload's setup/teardown runs once for all sides: side or sweep placeholders mean nothing there."""
    for command in commands:
        for name in PLACEHOLDER.findall(command):
            if name not in ("workload", "experiment"):
                raise at.fail(f"uses {{{name}}}, but it runs once for every side and sweep point",
                              "use only {workload} and {experiment} here, or move the command to "
                              "variant.setup (run on each switch to a side)")
    return commands


def program(argv: tuple[str, ...], at: At) -> tuple[str, ...]:
    """A command naming its program."""
    if not argv or not argv[0]:
        raise at.fail("is empty", "name the server program")
    return argv


def interrupt_rows(rows: tuple[str, ...], at: At) -> tuple[str, ...]:
    """Row names of /proc/interrupts (the part before the colon)."""
    for row in rows:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", row):
            raise at.fail(f"{row!r} is not a /proc/interrupts row name",
                          'use the name before the colon, e.g. "TLB", "CAL", "RES" or an IRQ number')
    return rows


def vmstat_rows(rows: tuple[str, ...], at: At) -> tuple[str, ...]:
    """Row names of /proc/vmstat."""
    for row in rows:
        if not re.fullmatch(r"[a-z0-9_]+", row):
            raise at.fail(f"{row!r} is not a /proc/vmstat row name",
                          'use the name as /proc/vmstat prints it, e.g. "pgfault" or "nr_tlb_remote_flush"')
    return rows


def geometry(value: str, at: At) -> str:
    """A cache geometry ``size,assoc,line`` valgrind's simulator accepts."""
    from perfab.machine.caches import parse_level

    name = at.key.rsplit(".", 1)[-1]
    try:
        parse_level(name, value)
    except UsageError as e:
        raise SpecError(f"{at.path}: {at.key}: {e}") from None
    return value


@dataclass(frozen=True)
class Port(Kind):
    """A TCP port, 1..65535."""

    words = "integer"

    def read(self, value: Any, at: At) -> int:
        port = typed(value, at, (int,))
        if not 0 < port < 65536:
            raise at.fail(f"{port} is not a TCP port", "use 1..65535")
        return port


@dataclass(frozen=True)
class Runs(Kind):
    """``runs``: measured runs per side, or ``"auto"`` (a sequential experiment)."""

    count: Integer  # the accepted numbers of runs

    words = 'integer or "auto"'

    def read(self, value: Any, at: At) -> int | str:
        if isinstance(value, str) and value != AUTO:
            raise at.fail(f'expected integer or "auto", got string {value!r}',
                          'write runs = 20 (runs per side) or runs = "auto" (lower case, a sequential experiment)')
        return value if value == AUTO else self.count.read(value, at)


@dataclass(frozen=True)
class Params(Kind):
    """``params``: sweep parameters, each a non-empty list of distinct values ("N%" of the online CPUs)."""

    words = "table of arrays"

    def read(self, value: Any, at: At) -> tuple[tuple[str, tuple[str, ...]], ...]:
        out = []
        for name, values in typed(value, at, (dict,)).items():
            where = at.child(name)
            if not IDENT.fullmatch(name) or name in RESERVED:
                raise where.fail("is not a usable parameter name",
                                 f"use letters, digits and '_' (not {', '.join(sorted(RESERVED))})")
            if not isinstance(values, list) or not values:
                raise where.fail(f"expected a non-empty array of values, got {values!r}", "e.g. [1, 2, 4]")
            resolved = tuple(param_value(v, where) for v in values)
            if len(set(resolved)) != len(resolved):
                raise where.fail(f"values {list(resolved)} repeat (after resolving percentages)",
                                 "list each value once")
            out.append((name, resolved))
        points = math.prod(len(v) for _, v in out)
        if points > MAX_SWEEP_POINTS:
            raise at.fail(f"the grid has {points:,} points (more than {MAX_SWEEP_POINTS:,})", "sweep fewer values")
        return tuple(out)

    def write(self, value: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, list[str]]:
        return {name: list(values) for name, values in value}


PARAMS = Params()


def param_value(value: Any, at: At) -> str:
    """One sweep value as its placeholder text; "N%" becomes that share of the online CPUs (at least 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise at.fail(f"value {value!r} is not a number or string", 'write e.g. 4 or "50%"')
    if isinstance(value, float) and not math.isfinite(value):
        raise at.fail(f"value {value} is not finite", "write a plain number")
    if isinstance(value, str) and "%" in value:
        m = re.fullmatch(r"([0-9]{1,5}(?:\.[0-9]+)?)%", value.strip())
        if m is None or not 0 < float(m[1]) <= MAX_PERCENT:
            raise at.fail(f"value {value!r} is not a share of the online CPUs",
                          f'write "N%" with 0 < N <= {MAX_PERCENT:,} (e.g. "50%"), a number, or text without %')
        return str(max(1, round(float(m[1]) / 100 * os.sysconf("SC_NPROCESSORS_ONLN"))))
    if isinstance(value, str) and (not value or any(c in value for c in "{}\n")):
        raise at.fail(f"value {value!r} cannot be a placeholder value", "use plain text")
    return str(value)


def cpu_list(text: str) -> set[int]:
    """The CPUs of ``"1"`` or ``"0-1,3"``; empty for no text or text that is not such a list."""
    out: set[int] = set()
    for part in filter(None, (x.strip() for x in text.split(","))):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or int(hi or lo) < int(lo):
            return set()
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
