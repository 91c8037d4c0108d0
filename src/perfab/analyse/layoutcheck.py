"""The layout check: does a ``**`` verdict survive when the code and the stack are placed differently?

Method.  The main pair and its aligned pair (``NAME+align64``: every
function at a 64-byte boundary, a random stack offset per run;
``perfab.run.aligned``) are two experiments, each judged by its own
methods, margin and false-discovery control.  A row of the main pair that
is ``**`` is *layout-sensitive* when the same row (workload, sweep point,
metric, side) of the aligned pair is not ``**``, or is ``**`` with the
change's sign reversed: the verdict then depends on where code and data
happened to fall, not only on the change.  Rows that are not ``**`` are not
marked (an ``ns`` row has no verdict to lose), and a row the aligned pair
lacks is not checked.

Assumptions and limits: it is a replication under a placement
intervention, not a test of its own: no p-value combines the two pairs, and
an aligned pair with fewer runs or more noise can lose a real ``**`` by
power alone (the diagnostic shows both changes, so a reader sees a lost
verdict of the same sign and size for what it is).  Forcing one alignment
removes the layout differences that alignment governs (function entry
points, for the kernel the whole text after a changed function); random
stack offsets average over the environment's placement instead of fixing
it.  Link order and heap placement are not varied.  References: Mytkowicz,
Diwan, Hauswirth & Sweeney, "Producing wrong data without doing anything
obviously wrong!", ASPLOS 2009 (layout changes of a few bytes move
results by more than many optimisations); Curtsinger & Berger,
"STABILIZER: statistically sound performance evaluation", ASPLOS 2013
(randomising layout so a verdict holds over layouts).
"""

from __future__ import annotations

import math
from dataclasses import replace

from perfab.analyse.diagnostics import Diagnostic, Kind
from perfab.analyse.model import Analysis, Row
from perfab.analyse.verdicts import Verdict

WHAT = "every function aligned to 64 bytes, a random stack offset per run"  # the aligned pair, in words


def attach(a: Analysis, aligned: Analysis | None, name: str) -> Analysis:
    """``a`` with each layout-sensitive row marked and a summary of the check (or that it has not run)."""
    if aligned is None or not aligned.rows:
        return replace(a, warnings=(*a.warnings, Diagnostic(
            Kind.LAYOUT_CHECK, f"layout check: the aligned pair {name} has no runs yet; `perfab run SPEC --resume` "
                               "runs it", {"experiment": name, "checked": 0, "sensitive": 0})))
    twins = {_key(r): r for r in aligned.rows}
    rows, checked, sensitive = [], 0, 0
    for r in a.rows:
        twin = twins.get(_key(r)) if r.verdict == Verdict.CHANGE else None
        if twin is not None:
            checked += 1
            if not kept(r, twin):
                sensitive += 1
                r = replace(r, warnings=(*r.warnings, _sensitive(r, twin, name)))
        rows.append(r)
    summary = Diagnostic(Kind.LAYOUT_CHECK,
                         f"layout check against {name} ({WHAT}): {checked - sensitive} of {checked} `**` row(s) kept "
                         f"their verdict and sign; {sensitive} layout-sensitive",
                         {"experiment": name, "checked": checked, "sensitive": sensitive})
    return replace(a, rows=tuple(rows), warnings=(*a.warnings, summary))


def kept(row: Row, twin: Row) -> bool:
    """The aligned pair's row is ``**`` too, with the same sign of change."""
    return twin.verdict == Verdict.CHANGE and _sign(twin) == _sign(row) != 0


def sensitive(row: Row) -> bool:
    """The row carries the layout check's mark."""
    return any(d.kind == Kind.LAYOUT_SENSITIVE for d in row.warnings)


def _key(r: Row) -> tuple:
    return (r.workload, r.params, r.metric, r.variant)


def _change(r: Row) -> float | None:
    """The row's change: the ratio's delta, else the shift."""
    e = r.estimate
    if e is None:
        return None
    return e.delta if e.delta is not None else e.shift


def _sign(r: Row) -> int:
    change = _change(r)
    return 0 if change is None or change == 0 or math.isnan(change) else (1 if change > 0 else -1)


def _sensitive(row: Row, twin: Row, name: str) -> Diagnostic:
    delta, aligned = row.estimate.delta if row.estimate else None, twin.estimate.delta if twin.estimate else None
    here, there = _words(row), _words(twin)
    return Diagnostic(Kind.LAYOUT_SENSITIVE,
                      f"layout-sensitive: {here} here, {there} in {name} ({WHAT})",
                      {"experiment": name, "aligned_verdict": Verdict(twin.verdict).value,
                       "aligned_delta": aligned, "delta": delta})


def _words(r: Row) -> str:
    """``** +1.20%`` / ``ns -0.05%`` / ``** +12 (absolute)``."""
    e = r.estimate
    if e is None:
        return Verdict(r.verdict).value
    change = f"{100 * e.delta:+.2f}%" if e.delta is not None else f"{e.shift:+.4g} (absolute)"
    return f"{Verdict(r.verdict).value} {change}"
