"""Shared pieces of the workload-output parsers: the metric value, the error, helpers.

Every parser module defines ``parse(stdout, stderr, options)`` returning
``dict[str, ParsedMetric]``, ``OPTIONS`` (the option names it accepts) and
``METRICS`` (a tuple of :class:`DeclaredMetric`: every metric it can produce,
with unit, direction and meaning).  Metric names are snake_case with the unit
last (``latency_p99_ms``), so a report table reads without a legend.

Every printed number goes through :func:`number`, which returns a finite
float or raises :class:`ParseError`: whatever the bytes, a parser returns
finite values or raises ParseError, nothing else.  Dedicated parsers build
their result with a :class:`Collector`, which takes each metric's unit and
direction from the module's ``METRICS``, so the declaration is the code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from perfab.errors import PerfabError

# A decimal number as tools print it: 12, 0.5, .5, 1e-3, -nan is not one.
# A printed number, whole: never the leading digits of "0x10", "1,5" or "2.5.1" (refused, not cut short).
NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![xX\d]|[.,]\d)"
# A whole whitespace-delimited field: a damaged value ("0x1F", "1,5", "nan") is read whole and refused
# by ``number``, never cut to the digits that happen to lead it.
FIELD = r"\S+"


@dataclass(frozen=True)
class ParsedMetric:
    """One number read from a workload's output."""

    value: float  # the reading, in `unit`; always finite
    unit: str  # "ops/s", "s", "us", "count", "MB/s", "%", ...
    higher_is_better: bool | None  # direction; None when neither side is good


@dataclass(frozen=True)
class DeclaredMetric:
    """One kind of metric a parser produces: its name or name pattern, unit, direction and meaning."""

    name: str  # the name; "{part}" marks text taken from the output: "latency_p{N}_ms", "{bench}_ops_per_s"
    unit: str | None  # unit of the value; None when the output or the options give it
    higher_is_better: bool | None  # direction; None when no side is better (generic parsers: unless options set one)
    meaning: str  # one line: what the number is

    def matches(self, name: str) -> bool:
        """Whether ``name`` has this entry's form; each ``{part}`` stands for one or more characters."""
        pieces = re.split(r"\{\w+\}", self.name)
        return re.fullmatch(".+".join(re.escape(p) for p in pieces), name, re.DOTALL) is not None


class ParseError(PerfabError):
    """The workload's output lacks what its parser needs (wrong parser, or the run failed)."""


def number(text: object, what: str, scale: float = 1.0) -> float:
    """``text`` as printed (or a number already) times ``scale``, as a finite float.

    ParseError naming ``what`` and the text for anything else: ``nan``,
    ``inf``, ``1e400`` (infinite once read), ``0.5x``, an empty field, a bool,
    or a product that overflows.
    """
    value = math.nan
    if isinstance(text, (str, int, float)) and not isinstance(text, bool):
        try:
            value = float(text)
        except (ValueError, OverflowError):
            pass
    shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:37] + "..."
    verb = "reads" if isinstance(text, str) else "comes to"
    if not math.isfinite(value):
        raise ParseError(f"{what} {verb} {shown}, which is not a finite number: "
                         "check the workload's output (cut short or damaged, or not what the parser expects)")
    if not math.isfinite(value * scale):
        raise ParseError(f"{what} {verb} {shown}, which overflows when converted to the metric's unit: "
                         "check the workload's output")
    return value * scale


def metric(value: object, unit: str, higher_is_better: bool | None, what: str = "a metric") -> ParsedMetric:
    """A ParsedMetric from a printed number; ParseError (naming ``what``) unless it is finite."""
    return ParsedMetric(number(value, what), unit, higher_is_better)


class Collector:
    """The metrics of one parse, each made from an entry of the parser's ``METRICS``.

    ``add(key, text, **parts)`` fills the ``{part}`` placeholders of the entry
    named ``key`` with slugs of ``parts``, reads ``text`` with :func:`number`
    and takes unit and direction from the entry.
    """

    def __init__(self, tool: str, declared: Iterable[DeclaredMetric]) -> None:
        self.tool = tool  # the tool's name, for error messages
        self.declared = {entry.name: entry for entry in declared}  # METRICS by name pattern
        self.metrics: dict[str, ParsedMetric] = {}  # what was read so far
        self.added = 0  # number of add() calls: a repeated name replaces the earlier value but counts

    def add(self, key: str, text: object, *, with_unit: str | None = None, scale: float = 1.0,
            name: str | None = None, **parts: object) -> ParsedMetric:
        """Record ``key`` with its parts filled in (or as ``name``, which must have the key's form).

        ``with_unit`` is the unit for entries that declare none; ``scale`` multiplies the value.
        """
        entry = self.declared[key]
        if name is None:
            name = key.format(**{k: self._part(v) for k, v in parts.items()})
        elif not entry.matches(name):
            raise ParseError(f"{self.tool} output gives a metric name {name[:40]!r} without the form {key!r}: "
                             "check the workload's output")
        unit = entry.unit if entry.unit is not None else with_unit
        if unit is None:
            raise TypeError(f"metric {key!r} declares no unit, so add() needs one")
        found = ParsedMetric(number(text, f"{self.tool} metric {name[:60]!r}", scale), unit, entry.higher_is_better)
        self.metrics[name] = found
        self.added += 1
        return found

    def table(self, fields: Mapping[str, str], text: str) -> None:
        """For each ``regex -> key``, add the first group of the regex's last match, where it matches."""
        for pattern, key in fields.items():
            if found := last_match(pattern, text):
                self.add(key, found[1])

    def result(self, what: str) -> dict[str, ParsedMetric]:
        """The metrics, or ParseError saying the output had none of ``what``."""
        if not self.metrics:
            raise missing(self.tool, what)
        return self.metrics

    def _part(self, text: object) -> str:
        part = slug(str(text))
        if not part:
            raise ParseError(f"{self.tool} output names a result {str(text)[:40]!r} that has no letters or "
                             "digits, so it cannot name a metric: check the workload's output")
        return part


def combined(stdout: str, stderr: str) -> str:
    """Both streams as one text: tools disagree about where results go."""
    return f"{stdout}\n{stderr}"


def slug(text: str) -> str:
    """``'Process fork+exit'`` -> ``'process_fork_exit'``: a metric-name fragment."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def missing(tool: str, what: str) -> ParseError:
    """The standard one-line complaint when a tool's output lacks ``what``."""
    return ParseError(f"{tool} output has no {what}: is the workload really {tool}?")


def last_match(pattern: str, text: str, flags: int = re.MULTILINE) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text``: final summaries follow progress lines."""
    found = None
    for found in re.finditer(pattern, text, flags):
        pass
    return found


def need(pattern: str, text: str, tool: str, what: str) -> re.Match[str]:
    """``last_match`` or a ParseError naming ``what`` is missing."""
    found = last_match(pattern, text)
    if found is None:
        raise missing(tool, what)
    return found


def lines(text: str) -> Iterable[str]:
    """Lines split on both ``\\n`` and ``\\r`` (progress meters rewrite one line)."""
    return re.split(r"[\r\n]+", text)
