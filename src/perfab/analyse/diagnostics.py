"""What the analysis noticed, as objects: a kind, the numbers, and the sentence to print.

Rows carry diagnostics about their data; the analysis carries the
experiment's (sessions, sides, pooling) the same way.

A report chooses what to show by ``kind`` (a row with no samples on a side
is listed as not compared, its diagnostic is not repeated), never by
matching the sentence; ``text`` is what every format prints, unchanged.
``DATA`` names, for every kind, the keys of its ``data`` (the JSON report
documents them from it, ``docs/report-json.md``): each diagnostic of a
kind carries exactly those keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """What a diagnostic is about; the value is its name in code and documentation (``DATA`` says what
    each kind means and which data it carries)."""

    NO_SAMPLES = "no_samples"
    RUNS_USED = "runs_used"
    NON_FINITE = "non_finite"
    METHOD_FALLBACK = "method_fallback"
    METHOD = "method"
    BASIS = "basis"
    TOO_FEW_RUNS = "too_few_runs"
    DRIFT = "drift"
    BIMODAL = "bimodal"
    NO_SPREAD = "no_spread"
    SERIAL = "serial"
    RESOLUTION = "resolution"
    SEQUENTIAL = "sequential"
    ONE_SESSION = "one_session"
    UNFINISHED = "unfinished"
    WORKLOADS_CHANGED = "workloads_changed"
    PARSER_CHANGED = "parser_changed"
    POOLED = "pooled"
    SEQUENTIAL_ORDER = "sequential_order"
    FAILED_RUNS = "failed_runs"
    LAYOUT_SENSITIVE = "layout_sensitive"
    LAYOUT_CHECK = "layout_check"
    ONE_DRAW = "one_draw"
    ONE_LAYOUT = "one_layout"


@dataclass(frozen=True)
class Key:
    """One entry of a diagnostic's ``data``."""

    name: str  # its key
    type_: object  # its Python type: int, float, str, bool, list (of str); ``str | None`` where it may be null
    meaning: str  # what it holds


@dataclass(frozen=True)
class Shape:
    """What a kind of diagnostic means, and the keys of its data."""

    about: str  # when the analysis gives it
    keys: tuple[Key, ...]  # exactly the keys of its ``data``


_SIDE = Key("side", str, "the side it is about")
_N = (Key("n_base", int, "baseline runs used"), Key("n_exp", int, "the other side's runs used"))

DATA: dict[Kind, Shape] = {
    Kind.NO_SAMPLES: Shape("a side has no usable run of the metric: not compared", _N),
    Kind.RUNS_USED: Shape("some runs of a side had no usable reading of the metric: the row uses the others", (
        _SIDE,
        Key("used", int, "the side's runs the row uses"),
        Key("dropped", int, "the side's runs left out, each with a reason stored beside the run"),
        Key("reason", str, "the most common reason"))),
    Kind.NON_FINITE: Shape("inf or nan samples: the row is refused", (
        Key("samples", int, "samples that are inf or nan, both sides"),)),
    Kind.METHOD_FALLBACK: Shape("the exact method was asked for, but the counts vary: judged by the rank test", (
        Key("asked", str, "the method asked for"),
        Key("used", str, "the method that judged the row"),
        Key("spread", float, "how far the counts vary around their median, a fraction"))),
    Kind.METHOD: Shape("what the method noticed about its own assumptions", (
        Key("method", str, "the method that noticed it"),)),
    Kind.BASIS: Shape("Delta is a shift over the baseline median (or in the metric's unit), not a ratio, and why", (
        Key("basis", str, "what Delta is: `shift/median` or `absolute`"),)),
    Kind.TOO_FEW_RUNS: Shape("the rank test cannot reach alpha at this n", (
        *_N, Key("alpha", float, "the significance level it cannot reach"))),
    Kind.DRIFT: Shape("a trend against run order within a side", (
        _SIDE,
        Key("rho", float, "Spearman rank correlation of value with run order"),
        Key("p", float, "its p-value"))),
    Kind.BIMODAL: Shape("a side's values fall into two clusters", (_SIDE,)),
    Kind.NO_SPREAD: Shape("every run of each side read the same value", (
        Key("metric", str, "the metric"),)),
    Kind.SERIAL: Shape("runs correlated in run order (widened, or too few runs to widen)", (
        Key("autocorrelation", float, "lag-1 autocorrelation of the runs in run order"),
        Key("z", float, "its normal score"),
        Key("widened", bool, "interval and p-value were widened (false: too few runs to estimate it)"))),
    Kind.RESOLUTION: Shape("the data's grid is coarser than the margin: flat cannot be shown", (
        Key("resolution", float, "the data's grid step (or the metric's clock tick) relative to the baseline"),
        Key("margin", float, "the equivalence margin, a fraction"),
        Key("coarse", bool, "less spread than one grid step: the interval covers any shift rounding hides"))),
    Kind.SEQUENTIAL: Shape("the sequential design's state of the row, or what it noticed", (
        Key("state", str, "the row's state at the newest look: `**`, `flat`, `continue` or `ns`"),
        Key("decided_at", int | None, "runs per side at the look that decided the row (null: undecided)"))),
    Kind.ONE_SESSION: Shape("an external side ran in one session: between-boot variation not estimated", (_SIDE,)),
    Kind.UNFINISHED: Shape("a session did not finish: the report counts the runs stored so far", (
        Key("session", int, "the session's id"),
        Key("status", str, "its status"))),
    Kind.WORKLOADS_CHANGED: Shape("sessions ran different workload definitions, pooled", (
        Key("definitions", int, "different workload definitions among the sessions"),)),
    Kind.PARSER_CHANGED: Shape("sessions read a workload's output with different parsers", (
        Key("workload", str, "the workload"),
        Key("parsers", list, "its parsers (with options), in the order the sessions used them"))),
    Kind.POOLED: Shape("pooled sessions differ in build, program, kernel, machine or spec", (
        Key("side", str | None, "the side (null: the spec, which every side shares)"),
        Key("differs", str, "what differs: `build`, `program`, `kernel`, `machine` or `spec`"),
        Key("program", str | None, "the program's path (null unless `differs` is `program`)"),
        Key("versions", int, "how many versions of it are pooled"))),
    Kind.SEQUENTIAL_ORDER: Shape("sides ran one after the other: drift is confounded with the change", (
        Key("order", str, "the spec's run order"),)),
    Kind.FAILED_RUNS: Shape("measured runs of a workload failed on a side", (
        Key("workload", str, "the workload"),
        _SIDE,
        Key("runs", int, "its failed measured runs"))),
    Kind.LAYOUT_SENSITIVE: Shape("a `**` row that vanishes or changes sign in the layout check's aligned pair", (
        Key("experiment", str, "the aligned pair's experiment (NAME+align64)"),
        Key("aligned_verdict", str, "the row's verdict in the aligned pair"),
        Key("aligned_delta", float | None, "the row's change there, a fraction (null where no ratio exists)"),
        Key("delta", float | None, "the row's change here, a fraction (null where no ratio exists)"))),
    Kind.LAYOUT_CHECK: Shape("what the layout check found over the `**` rows, or that it has not run", (
        Key("experiment", str, "the aligned pair's experiment (NAME+align64)"),
        Key("checked", int, "`**` rows compared with the aligned pair"),
        Key("sensitive", int, "of which layout-sensitive"))),
    Kind.ONE_DRAW: Shape("a session's runs of a side all went on from one saved guest, unperturbed: one draw "
                         "repeated, verdicts per run", (Key("session", int, "the session's id"),)),
    Kind.ONE_LAYOUT: Shape("`**` cache or branch rows of a simulator from one build per side: one code placement",
                           (Key("rows", int, "the `**` rows whose counts move with where the code sits"),)),
}


@dataclass(frozen=True)
class Diagnostic:
    """One fact the reader should see beside the verdicts (about a row's data, or the whole experiment)."""

    kind: Kind  # what it is about
    text: str  # the sentence the reports print
    data: dict = field(default_factory=dict, compare=False, hash=False)  # the numbers behind it, by name

    def __str__(self) -> str:
        return self.text


def diagnostics(kind: Kind, *texts: str | None, **data) -> tuple[Diagnostic, ...]:
    """Diagnostics of one kind, each with ``data``, from the check functions' sentences (``None``: the check
    did not fire)."""
    return tuple(Diagnostic(kind, t, dict(data)) for t in texts if t)
