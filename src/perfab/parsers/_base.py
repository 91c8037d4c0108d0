"""Shared pieces of the workload-output parsers: the metric value, the error, helpers.

Every parser module defines ``parse(stdout, stderr, options)`` returning
``dict[str, ParsedMetric]`` and ``OPTIONS``, the option names it accepts.
Metric names are snake_case with the unit last (``latency_p99_ms``), so a
report table reads without a legend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from perfab.errors import PerfabError

# A decimal number as tools print it: 12, 0.5, .5, 1e-3, -nan is not one.
NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


@dataclass(frozen=True)
class ParsedMetric:
    """One number read from a workload's output."""

    value: float  # the reading, in `unit`
    unit: str  # "ops/s", "s", "us", "count", "MB/s", "%", ...
    higher_is_better: bool | None  # direction; None when neither side is good


class ParseError(PerfabError):
    """The workload's output lacks what its parser needs (wrong parser, or the run failed)."""


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


def table_metrics(fields: dict[str, tuple[str, str, bool | None]], text: str) -> dict[str, ParsedMetric]:
    """For each ``pattern -> (name, unit, higher_is_better)``, the last match's first group, where it matches."""
    out = {}
    for pattern, (name, unit, better) in fields.items():
        if found := last_match(pattern, text):
            out[name] = metric(found[1], unit, better)
    return out


def metric(value: float | str, unit: str, higher_is_better: bool | None) -> ParsedMetric:
    """A ParsedMetric from a printed number."""
    return ParsedMetric(float(value), unit, higher_is_better)


def nonempty(metrics: dict[str, ParsedMetric], tool: str, what: str) -> dict[str, ParsedMetric]:
    """``metrics`` unless empty, when the output had none of ``what``."""
    if not metrics:
        raise missing(tool, what)
    return metrics


def lines(text: str) -> Iterable[str]:
    """Lines split on both ``\\n`` and ``\\r`` (progress meters rewrite one line)."""
    return re.split(r"[\r\n]+", text)
