"""What the analysis noticed, as objects: a kind, the numbers, and the sentence to print.

Rows carry diagnostics about their data; the analysis carries the
experiment's (sessions, sides, pooling) the same way.

A report chooses what to show by ``kind`` (a row with no samples on a side
is listed as not compared, its diagnostic is not repeated), never by
matching the sentence; ``text`` is what every format prints, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """What a diagnostic is about; the value is its name in code and documentation."""

    NO_SAMPLES = "no_samples"  # a side has no usable run of the metric: not compared
    NON_FINITE = "non_finite"  # inf or nan samples: the row is refused
    METHOD_FALLBACK = "method_fallback"  # the exact method was asked for, but the counts vary: rank test
    METHOD = "method"  # what the method noticed about its own assumptions
    BASIS = "basis"  # Delta is a shift over the baseline median, not a ratio, and why
    TOO_FEW_RUNS = "too_few_runs"  # the rank test cannot reach alpha at this n
    DRIFT = "drift"  # a trend against run order within a side
    BIMODAL = "bimodal"  # a side's values fall into two clusters
    NO_SPREAD = "no_spread"  # every run of each side read the same value
    SERIAL = "serial"  # runs correlated in run order (widened, or too few runs to widen)
    RESOLUTION = "resolution"  # the data's grid is coarser than the margin: flat cannot be shown
    SEQUENTIAL = "sequential"  # the sequential design's state of the row, or what it noticed
    ONE_SESSION = "one_session"  # an external side ran in one session: between-boot variation not estimated
    UNFINISHED = "unfinished"  # a session did not finish: the report counts the runs stored so far
    WORKLOADS_CHANGED = "workloads_changed"  # sessions ran different workload definitions, pooled
    PARSER_CHANGED = "parser_changed"  # sessions read a workload's output with different parsers
    POOLED = "pooled"  # pooled sessions differ in build, program, machine or spec
    SEQUENTIAL_ORDER = "sequential_order"  # sides ran one after the other: drift is confounded with the change
    FAILED_RUNS = "failed_runs"  # measured runs of a workload failed on a side


@dataclass(frozen=True)
class Diagnostic:
    """One fact the reader should see beside the verdicts (about a row's data, or the whole experiment)."""

    kind: Kind  # what it is about
    text: str  # the sentence the reports print
    data: dict = field(default_factory=dict, compare=False, hash=False)  # the numbers behind it, by name

    def __str__(self) -> str:
        return self.text


def diagnostics(kind: Kind, *texts: str | None) -> tuple[Diagnostic, ...]:
    """Diagnostics of one kind from the check functions' sentences (``None``: the check did not fire)."""
    return tuple(Diagnostic(kind, t) for t in texts if t)
