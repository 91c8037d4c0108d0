"""The kinds of value a spec key holds: each checks a TOML value, turns it into its typed form and back.

A ``Kind`` names its TOML type in words (the README's type column), reads
a value found at a dotted key (``At``) into the typed value the spec's
dataclasses hold, and writes a typed value back as TOML
(``perfab.specfile.writer``).  Every refusal is a one-line ``SpecError`` naming
the file, the key, the problem and the fix.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from perfab.errors import SpecError

_TOML_NAMES = {dict: "table", list: "array", str: "string", int: "integer", float: "float", bool: "boolean"}
_NAME = re.compile(r"[A-Za-z0-9_.+-][A-Za-z0-9_.+ -]*")
MAX_CPU = 8191  # sched_setaffinity masks perfab builds


@dataclass(frozen=True)
class At:
    """Where a value sits in a spec: the file and the dotted key, for error messages."""

    path: str  # the spec file's path
    key: str  # dotted key, e.g. "workload[0].timeout"; "" for the document itself

    def fail(self, problem: str, fix: str) -> SpecError:
        """The one-line error for this key."""
        return SpecError(f"{self.path}: {self.key}: {problem}; {fix}")

    def child(self, name: str) -> "At":
        """The key ``name`` inside this table."""
        return At(self.path, f"{self.key}.{name}" if self.key else name)

    def item(self, index: int) -> "At":
        """Element ``index`` of this array."""
        return At(self.path, f"{self.key}[{index}]")


def toml_name(value: Any) -> str:
    """The TOML type of a parsed value, in words."""
    return _TOML_NAMES.get(type(value), type(value).__name__)


def typed(value: Any, at: At, types: tuple[type, ...]) -> Any:
    """``value`` when it has one of ``types`` (a boolean is no integer); else the error naming both."""
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
        return value
    names = " or ".join(_TOML_NAMES[t] for t in types)
    raise at.fail(f"expected {names}, got {toml_name(value)} {value!r}", f"write it as a TOML {names}")


def bounded(value: Any, at: At, lo: float | None, hi: float | None) -> Any:
    """A finite number within ``lo``..``hi``."""
    if not math.isfinite(value):
        raise at.fail(f"must be a finite number, got {value}", "write a plain number")
    if lo is not None and value < lo:
        raise at.fail(f"must be >= {lo}, got {value}", f"use a value >= {lo}")
    if hi is not None and value > hi:
        raise at.fail(f"must be <= {hi:,}, got {value:,}", f"use a value <= {hi:,}")
    return value


class Kind:
    """How one key's value is checked, typed and written back; subclasses are small frozen dataclasses."""

    words = ""  # the TOML type in words, for the README

    def read(self, value: Any, at: At) -> Any:
        return value

    def write(self, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class Bool(Kind):
    """``true`` or ``false``."""

    words = "boolean"

    def read(self, value: Any, at: At) -> bool:
        return typed(value, at, (bool,))


@dataclass(frozen=True)
class Text(Kind):
    """A string; ``check`` (optional) refuses or normalises it."""

    check: Callable[[str, At], str] | None = None  # named value check, e.g. a regex that must compile
    words: str = "string"  # the README's type column

    def read(self, value: Any, at: At) -> str:
        value = typed(value, at, (str,))
        return value if self.check is None else self.check(value, at)


@dataclass(frozen=True)
class Name(Kind):
    """A name usable in commands and reports: letters, digits, ``_-.+`` and inner spaces."""

    words = "string"

    def read(self, value: Any, at: At) -> str:
        value = typed(value, at, (str,))
        if not _NAME.fullmatch(value):
            raise at.fail(f"{value!r} is not a usable name", "use letters, digits, '_', '-', '.', '+' and spaces")
        return value


@dataclass(frozen=True)
class Choice(Kind):
    """One string of a fixed set (``choices`` may be a function, for a set owned by a later stage)."""

    choices: tuple[str, ...] | Callable[[], tuple[str, ...]]  # the accepted values
    problem: str = "unknown value {!r}"  # how a value outside them is named
    fix: str | None = None  # the fix; None: "use one of: ..."
    words: str = "string"  # the README's type column

    def options(self) -> tuple[str, ...]:
        """The accepted values."""
        return self.choices() if callable(self.choices) else self.choices

    def read(self, value: Any, at: At) -> str:
        value = typed(value, at, (str,))
        options = self.options()
        if value not in options:
            raise at.fail(self.problem.format(value), self.fix or f"use one of: {', '.join(options)}")
        return value


@dataclass(frozen=True)
class Integer(Kind):
    """A TOML integer within ``lo``..``hi``."""

    lo: int | None = 0  # the least value accepted
    hi: int | None = None  # the largest value accepted

    words = "integer"

    def read(self, value: Any, at: At) -> int:
        return bounded(typed(value, at, (int,)), at, self.lo, self.hi)


@dataclass(frozen=True)
class Number(Kind):
    """An integer or float within ``lo``..``hi``, typed as a float."""

    lo: float | None = 0  # the least value accepted
    hi: float | None = None  # the largest value accepted

    words = "float"

    def read(self, value: Any, at: At) -> float:
        return float(bounded(typed(value, at, (int, float)), at, self.lo, self.hi))


@dataclass(frozen=True)
class Probability(Kind):
    """A TOML float strictly between 0 and 1 (alpha, confidence)."""

    example: str  # the fix's example, e.g. "alpha = 0.05, confidence = 0.95"

    words = "float"

    def read(self, value: Any, at: At) -> float:
        value = typed(value, at, (float,))
        if not 0 < value < 1:
            raise at.fail(f"must lie strictly between 0 and 1, got {value}", f"e.g. {self.example}")
        return value


@dataclass(frozen=True)
class Strings(Kind):
    """An array of strings, or one string (read as an array of one)."""

    check: Callable[[tuple[str, ...], At], tuple[str, ...]] | None = None  # named check of the whole list
    words: str = "array of strings"  # the README's type column

    def read(self, value: Any, at: At) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise at.fail(f"expected a list of strings, got {value!r}", 'write it as ["a", "b"]')
        return tuple(value) if self.check is None else self.check(tuple(value), at)

    def write(self, value: tuple[str, ...]) -> list[str]:
        return list(value)


@dataclass(frozen=True)
class StrMap(Kind):
    """A table of strings (numbers are taken as their text); ``check`` refuses a bad name."""

    check: Callable[[str, At], None] | None = None  # named check of each name
    words: str = "table of strings"  # the README's type column

    def read(self, value: Any, at: At) -> dict[str, str]:
        out = {}
        for k, v in typed(value, at, (dict,)).items():
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise at.child(k).fail(f"expected a string, got {v!r}", "quote the value")
            out[k] = str(v)
        for k in out:
            if self.check is not None:
                self.check(k, at)
        return out


@dataclass(frozen=True)
class Pairs(StrMap):
    """A table of strings typed as ordered (name, value) pairs (kernel config options)."""

    def read(self, value: Any, at: At) -> tuple[tuple[str, str], ...]:
        return tuple(super().read(value, at).items())

    def write(self, value: tuple[tuple[str, str], ...]) -> dict[str, str]:
        return dict(value)


@dataclass(frozen=True)
class AnyTable(Kind):
    """A table whose keys belong to another stage (a parser's options)."""

    words = "table"

    def read(self, value: Any, at: At) -> dict[str, Any]:
        return typed(value, at, (dict,))


@dataclass(frozen=True)
class CpuList(Kind):
    """A CPU list such as ``"2"`` or ``"0-1,3"`` (an integer is one CPU)."""

    types: tuple[type, ...] = (str, int)  # what TOML types are accepted
    words: str = "string or integer"  # the README's type column

    def read(self, value: Any, at: At) -> str:
        return cpu_list(str(typed(value, at, self.types)), at)


def cpu_list(value: str, at: At) -> str:
    """``value`` when it is a CPU list of CPUs 0..MAX_CPU whose ranges run forwards."""
    if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", value):
        raise at.fail(f"{value!r} is not a CPU list", 'write it like "2" or "0-1,3"')
    for part in value.split(","):
        lo, _, hi = part.partition("-")
        if int(lo) > MAX_CPU or int(hi or lo) > MAX_CPU:
            raise at.fail(f"CPU {max(int(lo), int(hi or lo))} in {value!r} is out of range",
                          f"use CPU numbers 0..{MAX_CPU}")
        if hi and int(hi) < int(lo):
            raise at.fail(f"range {part!r} runs backwards", f'write it as "{hi}-{lo}"')
    return value


@dataclass(frozen=True)
class Sub(Kind):
    """A table of its own schema (``perfab.specfile.schema.TABLES[table]``), read by the reader's loop."""

    table: str  # its schema table, e.g. "workload.service"
    not_table: tuple[str, str] | None = None  # (problem, fix) when it is no table; None: the type error
    words: str = "table"  # the README's type column


@dataclass(frozen=True)
class Subs(Kind):
    """An array of tables of one schema, each named uniquely."""

    table: str  # their schema table, e.g. "workload.metric"
    element: tuple[str, str] | None = None  # (problem, fix) for an element that is no table; None: the default
    empty: tuple[str, str] | None = None  # (problem, fix) when the array is empty; None: allowed
    words: str = "array of tables"  # the README's type column
