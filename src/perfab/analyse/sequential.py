"""Sequential experiments: look after every block, stop when every row is decided, keep the error rates.

A fixed number of runs is either too many (a 5% change on a quiet machine
is clear after six runs) or too few, and stopping "when the p-value looks
good" voids the p-value.  Here the runner looks after every block and asks
``decide``; the looks are paid for by a group-sequential design, so the
verdicts keep their error rates whatever the runner does with them.

Method (``methods.AssumeSequential``, name ``sequential``): for each row,
the Hodges-Lehmann interval of the rank-sum test at look ``k`` is taken at
the nominal level of a two-sided Lan-DeMets error-spending boundary
(``spending``) whose information fraction is the share of ``max_runs`` seen
so far.  The intervals of all looks together cover the true change with
probability ``confidence`` (Jennison & Turnbull's repeated confidence
intervals, 2000, ch. 9), so they may be intersected and any stopping rule
may be used with them.  A row is

- ``**``   when the intersected interval lies beyond +-margin and its
           anytime-valid p-value (the repeated p-value of "the change lies
           beyond the margin", the running minimum over looks), adjusted
           across the rows, is at most ``alpha``;
- ``flat`` when the intersected interval lies inside +-margin (and the
           data's resolution is finer than the margin);
- ``continue`` otherwise, and ``ns`` when ``max_runs`` is reached, with the
           minimum detectable effect the design had at the noise seen.

Across rows, Holm's step-down (``multiple = "holm"``, the default) or the
Benjamini-Yekutieli step-up (``"by"``) adjusts the anytime-valid p-values
(``perfab.analyse.multiplicity``).
Both hold under any dependence between rows, which the common stopping time
creates (Benjamini-Hochberg assumes positive dependence and loses its
guarantee here): Holm bounds the probability of any false ``**`` (and so
the false discovery rate) by ``alpha``; BY bounds the false discovery rate
and gains over Holm only when many rows change.  e-BH on e-values
calibrated from these p-values (Wang & Ramdas, JRSS B 84 (2022) 822-852)
reduces to BY, hence BY stands for it.  Holm is weighted: the primary
rows, declared before the experiment, carry ``primary_share`` (0.8) of
alpha between them, so the row the experiment is about is not diluted by
every side metric of the report.

Rows of deterministic counts (``exact``) are decided at the first look by
the exact method, by the fixed report's rule (``method_exact.exact_verdict``:
a spread within its 0.1% tolerance never makes a change on its own).
Every look is widened for serial correlation in run order as a fixed
report's row is, once a side has ``serial.SERIAL_MIN_N`` runs
(``perfab.analyse.rci``), and reads the metric's grid as the fixed report
does (``perfab.analyse.grid``: a row on a grid coarser than its margin is
never ``flat``).  Intervals are on log values when every value is
positive, so Delta is a ratio.  The point estimate after a data-dependent
stop is biased away from zero (Jennison & Turnbull, ch. 8); the interval is
the honest summary.

For the runner (pure functions of the samples in run order; the looks are
the prefixes of ``min_runs``, ``min_runs + block``, ... runs per side, so
a report recomputes the runner's decisions from the stored runs)::

    design = Design(min_runs=6, max_runs=40, alpha=spec.alpha, confidence=spec.confidence)
    while True:
        run one more block (or the first ``min_runs`` runs per side)
        rows = from_rows(compare(dataset, spec).rows)
        decision = decide(rows, design)
        if decision.stop:
            break        # decision.reason: "stopped after 14 runs per side: ..."
        # decision.next_runs: runs per side the next look needs

``replay(rows, design)`` returns the decision a runner looking after every
block reaches on complete samples (its first stopping look).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Hashable

import numpy as np
from perfab.analyse.grid import resolution
from perfab.analyse.method_exact import AssumeExact
from perfab.analyse.method_rank import AssumeNothing
from perfab.analyse.methodbase import ABSOLUTE, Estimate, relative_cv
from perfab.analyse.multiplicity import MULTIPLE, adjust_anytime, holm_weights
from perfab.analyse.rci import Look, look
from perfab.analyse.spending import SPENDING, boundaries, level_table, nominal, repeated_p
from perfab.errors import UsageError
from perfab.units import fmt_pct

NAME = "sequential"  # the method its estimates name (``method_sequential.AssumeSequential``)
POWER_Z = 0.8416212335729143  # z of 80% power, for the minimum detectable effect


@dataclass(frozen=True)
class Design:
    """How a sequential experiment looks at its data and how much error each look may spend."""

    min_runs: int = 6  # runs per side before the first look
    max_runs: int = 40  # runs per side at the last look: the error left is spent there
    block: int = 2  # runs per side added between looks (an ABBA/BAAB block holds 2)
    alpha: float = 0.05  # level of `**` across the rows
    confidence: float = 0.95  # coverage of each row's intervals over all looks together
    spending: str = "pocock"  # error-spending function: pocock | obrien-fleming | linear
    stop_on: str = "primary"  # rows that must be decided to stop: primary (all when none is) | all
    multiple: str = "holm"  # adjustment across rows: holm | by
    primary_share: float = 0.8  # share of alpha the primary rows carry in Holm's procedure (when some rows are)

    def __post_init__(self):
        if not 2 <= self.min_runs <= self.max_runs:
            raise UsageError(f"sequential design: min_runs {self.min_runs} and max_runs {self.max_runs}: "
                             "need 2 <= min_runs <= max_runs (e.g. min_runs = 6, max_runs = 40)")
        if self.block < 1:
            raise UsageError(f"sequential design: block {self.block}: must be at least 1 run per side")
        for label, value in (("alpha", self.alpha), ("1 - confidence", 1 - self.confidence)):
            if not 0 < value <= 0.5:
                raise UsageError(f"sequential design: {label} {value:g}: must lie in (0, 0.5] (e.g. 0.05)")
        if not 0 < self.primary_share < 1:
            raise UsageError(f"sequential design: primary_share {self.primary_share:g}: must lie in (0, 1) "
                             "(e.g. 0.8)")
        for label, value, allowed in (("spending", self.spending, tuple(SPENDING)),
                                      ("stop_on", self.stop_on, ("primary", "all")),
                                      ("multiple", self.multiple, MULTIPLE)):
            if value not in allowed:
                raise UsageError(f"sequential design: {label} {value!r}: use one of {', '.join(allowed)}")

    def schedule(self, runs: int) -> tuple[int, ...]:
        """Runs per side at each look made by the time a side holds ``runs`` runs (the last look: all of them)."""
        if runs < self.min_runs:
            return ()
        planned = range(self.min_runs, min(runs, self.max_runs), self.block)
        return tuple(planned) + (runs,)

    def fraction(self, n_base: int, n_exp: int) -> float:
        """Information fraction: n*m/(n+m) over its value at ``max_runs`` per side, at most 1."""
        if n_base == 0 or n_exp == 0:
            return 0.0
        return min(1.0, n_base * n_exp / (n_base + n_exp) / (self.max_runs / 2))


@dataclass(frozen=True)
class SequentialRow:
    """One row to decide: a metric of a workload (at a sweep point), one variant against the baseline."""

    key: Hashable  # the caller's name for the row, e.g. (workload, params, metric, variant)
    base: tuple[float, ...]  # baseline samples in run order
    exp: tuple[float, ...]  # experiment samples in run order
    margin: float  # equivalence margin, as a fraction
    primary: bool = False  # must be decided before the experiment stops
    exact: bool = False  # deterministic counts: the exact method decides at the first look
    step: float = 0.0  # the metric's declared grid step, in its unit (``perfab.metrics.Metric.step``); 0: none


@dataclass(frozen=True)
class RowDecision:
    """One row's state at a look."""

    key: Hashable  # as given
    state: str  # ** | flat | continue | ns
    reason: str  # one line: why this state
    estimate: Estimate | None  # method sequential: delta now, lo/hi the intersected intervals, p anytime-valid
    p: float  # anytime-valid p-value of "the change lies beyond the margin" (1 for exact rows)
    q: float  # p adjusted across the rows (Holm or BY)
    decided_at: int | None  # runs per side at the look that decided the row
    mde: float | None  # smallest change called ** with 80% power by max_runs at the noise seen (fraction)
    warnings: tuple[str, ...] = ()  # what the method noticed


@dataclass(frozen=True)
class Decision:
    """What the runner does next, and why."""

    stop: bool  # no more runs
    reason: str  # one line for the report: "stopped after 14 runs per side: every primary row decided ..."
    runs_per_side: int  # runs per side at this look (the most of any row)
    next_runs: int | None  # runs per side the next look needs; None when stopping
    look: int  # 1-based index of this look; 0 before min_runs
    rows: tuple[RowDecision, ...]  # in the order given


def decide(rows: list[SequentialRow], design: Design) -> Decision:
    """The decision at the newest look: after the last block of the samples given."""
    runs = _runs(rows)
    schedule = design.schedule(runs)
    if not schedule:
        return Decision(False, f"continue: first look after {design.min_runs} runs per side", runs,
                        design.min_runs, 0, tuple(_waiting(r) for r in rows))
    return _Looks(rows, design, schedule).decision(len(schedule) - 1)


def replay(rows: list[SequentialRow], design: Design, estimates: bool = True) -> Decision:
    """The decision a runner that looks after every block reaches on these samples: its first stop.

    ``estimates=False`` leaves out the rows' estimates (the report's numbers), for simulations.
    """
    schedule = design.schedule(_runs(rows))
    if not schedule:
        return decide(rows, design)
    looks = _Looks(rows, design, schedule)
    first = next((j for j in range(len(schedule)) if looks.stops(j)), len(schedule) - 1)
    return looks.decision(first, estimates)


def from_rows(rows) -> list[SequentialRow]:
    """Rows of ``compare.compare`` (``Analysis.rows``) that a sequential design decides: those with an estimate."""
    return [SequentialRow((r.workload, r.params, r.metric, r.variant), r.base_values, r.exp_values, r.margin,
                          r.primary, r.estimate.traits.counted, r.step)
            for r in rows if r.estimate is not None]


def _runs(rows: list[SequentialRow]) -> int:
    return max((max(len(r.base), len(r.exp)) for r in rows), default=0)


def _waiting(row: SequentialRow) -> RowDecision:
    return RowDecision(row.key, "continue", "before the first look", None, 1.0, 1.0, None, None)


class _Looks:
    """Every row at every look of a schedule: intervals, running anytime p-values, adjusted p-values."""

    def __init__(self, rows: list[SequentialRow], design: Design, schedule: tuple[int, ...]):
        self.rows, self.design, self.schedule = rows, design, schedule
        trajectories = [_trajectory(r, design, schedule) for r in rows]
        self.paths = [path for _, path in trajectories]
        self.p = np.array([_running_p(r, t, path, design) for r, (t, path) in zip(rows, trajectories)]).reshape(
            len(rows), len(schedule))
        self.q = np.ones((len(rows), len(schedule)))
        tested = [i for i, r in enumerate(rows) if not r.exact]
        weights = holm_weights([rows[i].primary for i in tested], design.primary_share)
        for j in range(len(schedule)):
            self.q[tested, j] = adjust_anytime(list(self.p[tested, j]), design.multiple, weights)

    def state(self, i: int, j: int) -> tuple[str, str, float, float, tuple[str, ...]]:
        """(state, reason, lo, hi, warnings) of row ``i`` at look ``j``."""
        row, final = self.rows[i], self.schedule[j] >= self.design.max_runs
        if row.exact:
            return _exact_state(row, self.design) + (math.nan, math.nan, ())
        looks = [lk for lk in self.paths[i][: j + 1] if lk is not None]
        if not looks:
            return ("ns" if final else "continue"), "fewer than 2 usable runs on a side", math.nan, math.nan, ()
        lo, hi = max(lk.lo for lk in looks), min(lk.hi for lk in looks)
        warnings: tuple[str, ...] = ()
        if lo > hi:
            warnings = ("the intervals of successive looks do not overlap: the change is not a steady shift "
                        "(drift, or two clusters); the newest look's interval is shown",)
            lo, hi = looks[-1].lo, looks[-1].hi
        state, reason = _state(looks[-1], lo, hi, self.q[i, j], row.margin, self.design.alpha, final)
        return state, reason, lo, hi, warnings

    def stops(self, j: int) -> bool:
        return self._open(j) == [] or self.schedule[j] >= self.design.max_runs

    def _targets(self) -> list[int]:
        primary = [i for i, r in enumerate(self.rows) if r.primary] if self.design.stop_on == "primary" else []
        return primary or list(range(len(self.rows)))

    def _open(self, j: int) -> list[int]:
        return [i for i in self._targets() if self.state(i, j)[0] == "continue"]

    def decision(self, j: int, estimates: bool = True) -> Decision:
        rows = tuple(self._row(i, j, estimates) for i in range(len(self.rows)))
        return _summary(self.rows, rows, self.design, self.schedule, j, self._targets())

    def _row(self, i: int, j: int, estimates: bool = True) -> RowDecision:
        row = self.rows[i]
        state, reason, lo, hi, warnings = self.state(i, j)
        p, q = float(self.p[i, j]), float(self.q[i, j])
        if row.exact:
            est = _exact_estimate(row, self.design)
            return RowDecision(row.key, state, reason, est, p, q, self.schedule[0], None, est.warnings)
        looks = [lk for lk in self.paths[i][: j + 1] if lk is not None]
        if not looks:
            return RowDecision(row.key, state, reason, None, p, q, None, None)
        mde = _mde(row, looks[-1], self.design)
        if state == "ns" and mde is not None:

            reason += f"; minimum detectable effect at this noise {fmt_pct(mde)}"
        decided = next((self.schedule[k] for k in range(j + 1) if self.state(i, k)[0] == state),
                       None) if state in ("**", "flat") else None
        est = _estimate(row, looks[-1], lo, hi, p, self.design, warnings) if estimates else None
        return RowDecision(row.key, state, reason, est, p, q, decided, mde, warnings)


def _trajectory(row: SequentialRow, design: Design,
                schedule: tuple[int, ...]) -> tuple[tuple[float, ...], list[Look | None]]:
    """The row's information fractions and its look at every look of the schedule (None: a side has < 2 runs)."""
    base, exp = np.asarray(row.base, dtype=float), np.asarray(row.exp, dtype=float)
    sizes = [(min(s, len(base)), min(s, len(exp))) for s in schedule]
    fractions = _fractions(design, sizes)
    nus = _nominals(design, fractions, 1 - design.confidence)
    tests = _nominals(design, fractions, design.alpha)
    out: list[Look | None] = []
    for (nb, ne), t, nu, test in zip(sizes, fractions, nus, tests):
        if row.exact or nb < 2 or ne < 2:
            out.append(None)
        else:
            out.append(look(base[:nb], exp[:ne], row.margin, nu, t, test, declared=row.step))
    return fractions, out


def _fractions(design: Design, sizes: list[tuple[int, int]]) -> tuple[float, ...]:
    """Increasing information fractions of the looks (a look that adds no information is nudged past the last)."""
    out: list[float] = []
    for nb, ne in sizes:
        t = max(design.fraction(nb, ne), 1e-9)
        if out and t <= out[-1]:
            t = out[-1] + 1e-9
        out.append(t)
    return tuple(out)


def _planned(design: Design, fractions: tuple[float, ...]) -> tuple[float, ...]:
    """The whole plan's fractions when ``fractions`` begin it (a look's boundary depends only on earlier looks).

    Sharing one plan lets every look of an experiment reuse the same cached boundaries and table.
    """
    plan = _fractions(design, [(s, s) for s in design.schedule(design.max_runs)])
    return plan if plan[: len(fractions)] == fractions else fractions


def _nominals(design: Design, fractions: tuple[float, ...], level: float) -> list[float]:
    c = boundaries(_planned(design, fractions), level, design.spending)
    return [nominal(x) for x in c[: len(fractions)]]


def _running_p(row: SequentialRow, fractions: tuple[float, ...], path: list[Look | None],
               design: Design) -> list[float]:
    """Running minimum over looks of the row's repeated p-values of "beyond the margin" (anytime-valid)."""
    if row.exact or all(lk is None for lk in path):
        return [1.0] * len(path)
    table = level_table(_planned(design, fractions), design.spending)
    out, best = [], 1.0
    for k, lk in enumerate(path):
        if lk is not None:
            best = min(best, repeated_p(lk.pi, k, table))
        out.append(best)
    return out


def _state(last: Look, lo: float, hi: float, q: float, margin: float, alpha: float, final: bool) -> tuple[str, str]:
    interval = f"interval {_pct(lo, last.basis)}..{_pct(hi, last.basis)}"
    bound = 0.0 if last.basis == ABSOLUTE else margin
    if q <= alpha and (lo > bound or hi < -bound):
        return "**", f"{interval} lies beyond +-{_mag(bound, last.basis)} (anytime p {q:.2g} adjusted)"
    if last.basis != ABSOLUTE and -margin <= lo and hi <= margin and last.resolution <= margin:
        return "flat", f"{interval} lies inside +-{_mag(margin, last.basis)}"
    if final:
        return "ns", f"max_runs reached; {interval} straddles the margin"
    return "continue", f"{interval} straddles the margin"


def _exact_estimate(row: SequentialRow, design: Design) -> Estimate | None:
    base, exp = np.asarray(row.base, dtype=float), np.asarray(row.exp, dtype=float)
    if len(base) == 0 or len(exp) == 0:
        return None
    return AssumeExact().compare(base, exp, design.confidence)


def _exact_state(row: SequentialRow, design: Design) -> tuple[str, str]:
    """The exact method's verdict, by the fixed report's rule (``method_exact.exact_verdict``: the 0.1% tolerance)."""
    est = _exact_estimate(row, design)
    if est is None:
        return "continue", "no runs on a side yet"
    state = str(AssumeExact().verdict(est, row.margin, None, design.alpha))
    if state == "ns":
        return state, ("deterministic counts, decided by the exact method at the first look: the spread it "
                       "tolerates within a side straddles the margin")
    return state, "deterministic counts: decided by the exact method at the first look"


def _mde(row: SequentialRow, last: Look, design: Design) -> float | None:
    """Margin plus (final boundary + z of 80% power) standard errors of the rank shift at max_runs."""
    base, exp = np.asarray(row.base[: last.n_base]), np.asarray(row.exp[: last.n_exp])
    cvs = [c for c in (relative_cv(base), relative_cv(exp)) if c is not None]
    if not cvs or last.basis == ABSOLUTE:
        return None
    planned = _fractions(design, [(s, s) for s in design.schedule(design.max_runs)])
    c_final = boundaries(planned, design.alpha, design.spending)[-1]
    se = max(cvs) * math.sqrt(2 / design.max_runs) * math.sqrt(math.pi / 3)
    return row.margin + (c_final + POWER_Z) * se


def _estimate(row: SequentialRow, last: Look, lo: float, hi: float, p: float, design: Design,
              warnings: tuple[str, ...]) -> Estimate:
    """The rank method's estimate at the newest look and its nominal level, with the intersected interval and p."""
    base, exp = np.asarray(row.base[: last.n_base], dtype=float), np.asarray(row.exp[: last.n_exp], dtype=float)
    est = AssumeNothing().compare(base, exp, 1 - last.nu, step=resolution(base, exp, declared=row.step,
                                                                          margin=row.margin))
    est = replace(est, resolution=last.resolution)
    if last.basis == ABSOLUTE:
        return replace(est, method=NAME, shift_lo=lo, shift_hi=hi, p=p, warnings=est.warnings + warnings)
    return replace(est, method=NAME, delta=last.delta, lo=lo, hi=hi, p=p, warnings=est.warnings + warnings)


def _summary(rows, decisions: tuple[RowDecision, ...], design: Design, schedule, j: int,
             targets: list[int]) -> Decision:
    runs = schedule[j]
    open_ = [i for i in targets if decisions[i].state == "continue"]
    counts = _counts(decisions)
    which = "primary row" if design.stop_on == "primary" and any(r.primary for r in rows) else "row"
    per_side = _per_side(rows, runs)
    if runs >= design.max_runs:
        return Decision(True, f"stopped at max_runs ({per_side}): {counts}", runs, None, j + 1, decisions)
    if not open_:
        reason = f"stopped after {per_side}: every {which} decided ({counts})"
        return Decision(True, reason, runs, None, j + 1, decisions)
    next_runs = min(runs + design.block, design.max_runs)
    reason = f"continue: {len(open_)} of {len(targets)} {which}s undecided; next look after {next_runs} runs per side"
    return Decision(False, reason, runs, next_runs, j + 1, decisions)


def _per_side(rows, runs: int) -> str:
    """``8 runs per side``, or, when failed or excluded runs left the sides unequal, the counts really used."""
    sizes = [n for r in rows for n in (len(r.base), len(r.exp))]
    if not sizes or min(sizes) == max(sizes):
        return f"{runs} runs per side"
    return (f"{runs} runs per side planned; usable runs per side {min(sizes)} to {max(sizes)}, as a side's runs "
            "failed or were excluded")


def _counts(decisions: tuple[RowDecision, ...]) -> str:
    parts = []
    for state in ("**", "flat", "ns", "continue"):
        n = sum(d.state == state for d in decisions)
        if n:
            parts.append(f"{n} {state}")
    return ", ".join(parts) or "no rows"


def _mag(x: float, basis: str) -> str:
    return f"{x:.4g}" if basis == ABSOLUTE else f"{100 * x:.3g}%"


def _pct(x: float, basis: str) -> str:
    if not math.isfinite(x):
        return "-inf" if x < 0 else "+inf"
    return f"{x:+.4g}" if basis == ABSOLUTE else f"{100 * x:+.3g}%"


def sequential_estimate(base: np.ndarray, exp: np.ndarray, confidence: float, design: Design | None = None,
                        margin: float = 0.0, step: float = 0.0) -> Estimate:
    """``AssumeSequential.compare``: the row's estimate after looks every block from ``min_runs``.

    Without a design, the samples at hand are taken as the whole plan
    (``max_runs`` = the larger side), so the error is fully spent by now.
    """
    runs = max(len(base), len(exp))
    if design is None:
        design = Design(min_runs=min(Design.min_runs, max(2, runs)), max_runs=max(2, runs),
                        confidence=confidence)
    decision = decide([SequentialRow("row", tuple(base), tuple(exp), margin, step=step)], design)
    est = decision.rows[0].estimate
    if est is None:
        est = replace(AssumeNothing().compare(np.asarray(base, float), np.asarray(exp, float), confidence),
                      method=NAME, lo=-math.inf, hi=math.inf, p=1.0)
    return est
