"""Compare per-symbol self-time shares between two sides.

Each run contributes one dict ``{key: share_pct}`` (``ProfileRecorder.collect``).
A symbol absent from a run had no sample in it and counts as 0 in that run,
so every symbol has exactly one value per run on both sides.  Per symbol the
comparison reports what the kernel test robot reports for
``perf-profile.self.*`` rows: each side's mean share with its relative
standard deviation, and the change of the means in percentage points.

Relative standard deviation follows lkp-tests' ``compare``: the population
standard deviation (divisor n) over the mean, in percent; 0 for one run or a
zero mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from scipy import stats

from perfab.analyse.multiplicity import adjust
from perfab.errors import UsageError

METHOD = "Welch t-test, Benjamini-Hochberg FDR"


@dataclass(frozen=True)
class ProfileRow:
    """One symbol's self share on both sides."""

    symbol: str  # metric key, "self.<event>:<level>.<symbol>"
    base_mean: float  # mean share over the baseline runs, percent of samples
    base_rsd_pct: float  # relative standard deviation of the baseline shares, percent
    delta_pp: float  # exp_mean - base_mean, percentage points
    exp_mean: float  # mean share over the experiment runs, percent of samples
    exp_rsd_pct: float  # relative standard deviation of the experiment shares, percent
    significant: bool  # the shares differ at the comparison's alpha (see welch_p, benjamini_hochberg)
    n_base: int  # baseline runs
    n_exp: int  # experiment runs
    p_value: float  # two-sided Welch p-value before multiplicity control
    exact: bool = False  # every run of each side read one share (counted, not sampled): no test, any change is real


class ProfileRows(list[ProfileRow]):
    """The rows of a comparison, plus what was left out of them and why."""

    def __init__(self, rows: Iterable[ProfileRow], *, dropped: int, min_share: float, alpha: float,
                 method: str, warnings: Sequence[str] = ()) -> None:  # fmt: skip
        super().__init__(rows)
        self.dropped = dropped  # symbols under min_share on both sides, not in the list
        self.min_share = min_share  # percent of samples a symbol needs on one side to be listed
        self.alpha = alpha  # significance level the rows were judged at
        self.method = method  # how "significant" was decided
        self.warnings = list(warnings)  # facts the report should show (too few runs, ...)


def _mean_rsd(values: list[float]) -> tuple[float, float]:
    mean = math.fsum(values) / len(values)
    if mean == 0:
        return 0.0, 0.0
    var = math.fsum((v - mean) ** 2 for v in values) / len(values)
    return mean, 100.0 * math.sqrt(var) / mean


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's unequal-variances t-test of mean(a) == mean(b).

    Method: t = (mean_a - mean_b) / sqrt(s_a^2/n_a + s_b^2/n_b) with sample
    variances (divisor n - 1) and the Welch-Satterthwaite degrees of freedom.
    Assumptions: runs are independent; each side's per-run shares are roughly
    normal (shares near 0% are skewed, so small shares are judged loosely);
    the variances may differ, which is why Welch and not Student.  It was
    chosen over Mann-Whitney because with 3 runs per side Mann-Whitney's
    smallest two-sided p-value is 0.1, so it could never flag a change.
    Degenerate case: both sides constant gives 0 if the means differ, else 1.
    Needs 2 or more runs per side; returns 1.0 otherwise.
    Reference: B. L. Welch, "The generalization of 'Student's' problem when
    several different population variances are involved", Biometrika 34
    (1947) 28-35.
    """
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return 1.0
    ma, mb = math.fsum(a) / na, math.fsum(b) / nb
    va = math.fsum((x - ma) ** 2 for x in a) / (na - 1) / na
    vb = math.fsum((x - mb) ** 2 for x in b) / (nb - 1) / nb
    if va + vb == 0:
        return 0.0 if ma != mb else 1.0
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return float(2.0 * stats.t.sf(abs(t), df))


def benjamini_hochberg(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Which hypotheses to reject so the false discovery rate stays at ``alpha``.

    Method: sort the m p-values, find the largest k with p_(k) <= k/m * alpha,
    reject the k smallest.  Assumes the tests are independent or positively
    dependent (shares of one profile are not, strictly; the control is then
    approximate).  Reference: Y. Benjamini and Y. Hochberg, "Controlling the
    false discovery rate", J. R. Statist. Soc. B 57 (1995) 289-300.  The
    adjusted p-values come from ``perfab.analyse.multiplicity.adjust``, as for the
    report's tables.
    """
    return [q <= alpha for q in adjust(list(p_values), "bh")]


def _check_runs(side: str, runs: list[dict[str, float]]) -> None:
    if not runs:
        raise UsageError(f"no {side} profiles to compare; record at least one {side} run with profiling on")
    for number, run in enumerate(runs, 1):
        if not run:
            raise UsageError(f"{side} profile {number} is empty; drop runs whose profile has no samples")
        bad = [k for k, v in run.items() if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0)]
        if bad:
            raise UsageError(f"{side} profile {number}: share of {bad[0]!r} is not a percentage >= 0")


def _row(symbol: str, base: list[float], exp: list[float]) -> ProfileRow:
    base_mean, base_rsd = _mean_rsd(base)
    exp_mean, exp_rsd = _mean_rsd(exp)
    return ProfileRow(
        symbol=symbol, base_mean=base_mean, base_rsd_pct=base_rsd, delta_pp=exp_mean - base_mean,
        exp_mean=exp_mean, exp_rsd_pct=exp_rsd, significant=False,
        n_base=len(base), n_exp=len(exp), p_value=welch_p(base, exp),
    )  # fmt: skip


def compare_profiles(
    base_runs: list[dict[str, float]],
    exp_runs: list[dict[str, float]],
    min_share: float = 0.5,
    alpha: float = 0.05,
    fdr: bool = True,
) -> ProfileRows:
    """Per-symbol rows sorted by |delta_pp|, largest first (ties by name).

    Symbols whose mean share is under ``min_share`` percent on both sides are
    left out; ``rows.dropped`` counts them.  A row is ``significant`` when its
    Welch p-value (``welch_p``) passes Benjamini-Hochberg at ``alpha`` over
    the listed rows, or, with ``fdr=False``, when p < ``alpha`` on its own.
    """
    _check_runs("baseline", base_runs)
    _check_runs("experiment", exp_runs)
    if not 0 < alpha < 1:
        raise UsageError(f"alpha must lie between 0 and 1 (e.g. 0.05), not {alpha!r}")
    if not min_share >= 0:
        raise UsageError(f"min_share must be a percentage >= 0, not {min_share!r}")
    symbols = sorted({key for run in (*base_runs, *exp_runs) for key in run})
    rows = [_row(s, [r.get(s, 0.0) for r in base_runs], [r.get(s, 0.0) for r in exp_runs]) for s in symbols]
    kept = _judge([r for r in rows if max(r.base_mean, r.exp_mean) >= min_share], alpha, fdr)
    kept.sort(key=lambda r: (-abs(r.delta_pp), r.symbol))
    warnings = []
    if len(base_runs) < 2 or len(exp_runs) < 2:
        warnings.append(
            f"need >= 2 profiled runs per side for a t-test (have {len(base_runs)} and {len(exp_runs)}); "
            "no row is marked significant"
        )
    method = METHOD if fdr else "Welch t-test"
    if any(r.exact for r in kept):
        method = (f"{method} where shares vary; where every run of each side read the same share (counted, e.g. "
                  f"kernel instructions), a change is exact and starred without a test")
    return ProfileRows(kept, dropped=len(rows) - len(kept), min_share=min_share, alpha=alpha,
                       method=method, warnings=warnings)  # fmt: skip


def _judge(rows: list[ProfileRow], alpha: float, fdr: bool) -> list[ProfileRow]:
    """``rows`` with ``significant`` set: Benjamini-Hochberg over the rows that vary, or each p < alpha; a row
    whose runs read one share on each side (2+ runs each: counted, not sampled) is exact, starred when it moved."""
    exact = [r.n_base >= 2 and r.n_exp >= 2 and r.base_rsd_pct == 0 and r.exp_rsd_pct == 0 for r in rows]
    tested = [r for r, e in zip(rows, exact) if not e]
    p_values = [r.p_value for r in tested]
    passed = iter(benjamini_hochberg(p_values, alpha) if fdr else [p < alpha for p in p_values])
    return [replace(r, exact=True, significant=r.delta_pp != 0) if e else replace(r, significant=next(passed))
            for r, e in zip(rows, exact)]
