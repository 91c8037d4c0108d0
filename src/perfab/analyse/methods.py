"""Statistical methods: each compares one metric's samples, experiment side against baseline.

A method is a named object with a docstring stating its test, its
assumptions and why it is used, so a reader can check every verdict.  All
return an ``Estimate``: centers, the relative delta with its confidence
interval (at ``confidence``, e.g. 0.95), the same change as an absolute
shift in the metric's unit, and a two-sided p-value.  ``alpha`` (the
significance level, e.g. 0.05) is not a method parameter: the report
applies it after the false-discovery-rate adjustment across rows.

What Delta is (``Estimate.basis``):

- ``ratio``: every value is positive: the change is a ratio of locations,
  ``delta = exp(shift of log values) - 1``;
- ``shift/median``: some values are zero (or negative) and the baseline's
  median is not: ``delta = shift / |baseline median|``;
- ``absolute``: the baseline's median is zero: no relative change exists;
  ``delta`` is None and the change is ``shift``, in the metric's unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from perfab.analyse.grid import resolution, under_one_step
from perfab.analyse.pairs import Pairs, triangle_quantiles
from perfab.analyse.ranks import hl_rank, rank_sum_p
from perfab.units import fmt_pct

RATIO, SHIFT_MEDIAN, ABSOLUTE = "ratio", "shift/median", "absolute"


@dataclass(frozen=True)
class Estimate:
    """One comparison of two samples."""

    method: str  # the method's name
    median_base: float  # baseline median
    median_exp: float  # experiment median
    mean_base: float  # baseline mean
    mean_exp: float  # experiment mean
    delta: float | None  # relative change, experiment vs baseline (0.01 = +1%); None when undefined
    lo: float | None  # lower end of the delta's confidence interval (-inf when unbounded)
    hi: float | None  # upper end
    p: float | None  # two-sided p-value; None for the exact method
    warnings: tuple[str, ...] = ()  # what the method noticed about its own assumptions
    basis: str = RATIO  # what delta is: ratio | shift/median | absolute (see the module docstring)
    shift: float | None = None  # the change in the metric's unit (Hodges-Lehmann shift, or difference of medians)
    shift_lo: float | None = None  # its interval, in the metric's unit
    shift_hi: float | None = None
    resolution: float = 0.0  # relative step below which flat cannot be shown: the data's grid or the metric's clock
    coarse: bool = False  # the spread is under half a grid step: the interval was widened by the worst rounding
    step: float = 0.0  # the grid step the values were taken on, in the metric's unit (``grid.resolution``); 0: none
    unchecked: bool = False  # exact method with one run on a side: that the counts repeat was never shown


class AssumeNothing:
    """Mann-Whitney U test with the Hodges-Lehmann shift and its distribution-free interval.

    Test: the two-sided Wilcoxon-Mann-Whitney rank-sum test, its p-value
    from the exact permutation distribution with mid-ranks for ties up to
    100 values, the normal approximation with tie correction beyond
    (``perfab.analyse.ranks``).

    Effect and interval: the Hodges-Lehmann estimator, the median of all
    n*m pairwise differences, computed on log values when every value is
    positive so it is a ratio (``delta = exp(HL) - 1``), on raw values
    otherwise (see the module docstring).  Its interval is the pair of order
    statistics of those differences that inverts the rank test (Bauer
    1972): with continuous data the interval excludes zero exactly when
    the test rejects.

    Coarse data (values on a grid of step q: a 4 ms clock, whole counts):
    the pairwise differences pile up on multiples of q and the order
    statistics collapse (an interval of [0, 0] for a real +5% change), so
    the grid is accounted for.  When each side's spread is at least about
    q/2 (``grid.under_one_step``), rounding errors are close to independent and uniform
    (Sheppard's condition; Heitjan, "Inference from grouped continuous
    data: a review", Statistical Science 4 (1989) 164-183) and every
    pairwise difference is spread over its possible rounding error (a
    triangle of half-width q/2 + q/2) before the same ranks are read off.
    When the spread is smaller, rounding can hide any shift up to one step,
    so the interval is widened by the largest rounding error of a
    difference (the sharp worst case).  The step is the metric's declared
    one or the one its values show (``perfab.analyse.grid``), given as
    ``step`` by the analysis.  The relative step is reported as
    ``resolution``: a row cannot be ``flat`` with a margin finer than it.
    Where the median of the raw differences is exactly 0 (two samples of
    zeros), the shift is 0: the rounding triangles shape the interval, they
    never invent a change.

    Assumptions: runs are independent and, under the null hypothesis, the
    two sides' distributions have the same shape (a pure shift on the
    scale used).  No normality; robust to the long right tails and
    outliers that timing data have.  Why: per-run performance noise is
    rarely normal, and a maintainer can check a rank test without trusting
    a model.

    Computation: the order statistics of the n*m differences are selected
    from the two sorted samples (``perfab.analyse.pairs``: randomized
    selection in the implicit sorted matrix, Johnson & Mizoguchi 1978), and
    the rounding triangles' quantiles are solved in closed form over the
    differences near each quantile, so time is O((n+m) log(n+m)) and
    memory O(n+m): the pairs are never built.  The results equal those of
    sorting all the differences.

    References: Hollander, Wolfe & Chicken, *Nonparametric Statistical
    Methods*, 3rd ed., 2014, sections 4.1-4.3; Bauer, "Constructing
    confidence sets using rank statistics", JASA 67 (1972) 687-690.
    """

    name = "nonparametric"

    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it."""
        return (f"Mann-Whitney U; Delta = Hodges-Lehmann ratio, {_level(confidence)} intervals "
                "(not the ratio of the medians shown)")

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        """The estimate; ``step`` is the values' grid (None: the one they show, ``grid.resolution``)."""
        n, m = len(base), len(exp)
        step = resolution(base, exp) if step is None else step
        log_scale = bool(np.all(base > 0) and np.all(exp > 0)) and (step == 0 or min(base.min(), exp.min()) > step)
        pairs = Pairs(base, exp, log=log_scale)
        k = hl_rank(n, m, confidence)
        coarse = step > 0 and (under_one_step(base, step) or under_one_step(exp, step))
        warnings: list[str] = []
        if step == 0:
            shift, lo, hi = pairs.order_interval(k)
        else:
            ea, eb = _rounding_errors(pairs, step, log_scale)
            if coarse:
                shift, lo, hi = pairs.order_interval(k)
                worst = float(ea.max() + eb.max())
                lo, hi = lo - worst, hi + worst
            else:
                shift, lo, hi = _smoothed_interval(pairs, ea, eb, k)
        p = rank_sum_p(base, exp)
        median_base = float(np.median(base))
        rel_step = step / abs(median_base) if median_base else (math.inf if step else 0.0)
        raw_shift = _raw_shift(pairs if not log_scale else Pairs(base, exp), step, coarse, k)
        if log_scale:
            est = _estimate(self.name, base, exp, math.expm1(shift), _expm1(lo), _expm1(hi), p, warnings, RATIO,
                            raw_shift, rel_step)
        elif median_base == 0:
            est = _estimate(self.name, base, exp, None, None, None, p, warnings, ABSOLUTE, (shift, lo, hi), rel_step)
        else:
            scale = abs(median_base)
            est = _estimate(self.name, base, exp, shift / scale, lo / scale, hi / scale, p, warnings, SHIFT_MEDIAN,
                            (shift, lo, hi), rel_step)
        return replace(est, coarse=coarse, step=step)


def _rounding_errors(pairs: Pairs, step: float, log_scale: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct value of each side, the largest error rounding to ``step`` puts into it (on the compared scale).

    A pairwise difference's rounding half-width is the sum of its two
    values' errors: ``step`` on raw values, and on log values the larger of
    the two one-sided log errors, ``log(x / (x - step/2))``.
    """
    if not log_scale:
        return np.full(len(pairs.a), step / 2), np.full(len(pairs.b), step / 2)
    err = lambda x: np.log(x / (x - step / 2))  # noqa: E731
    return err(pairs.raw_a), err(pairs.raw_b)


def _smoothed_interval(pairs: Pairs, ea: np.ndarray, eb: np.ndarray, k: int) -> tuple[float, float, float]:
    """HL shift and interval with each difference spread over a triangle of its rounding half-width."""
    nm = pairs.total
    zero = pairs.median() == 0  # the raw estimate is exactly 0: the triangles must not invent a change
    if k < 1:
        return 0.0 if zero else triangle_quantiles(pairs, ea, eb, [0.5])[0], -math.inf, math.inf
    center, lo, hi = triangle_quantiles(pairs, ea, eb, [0.5, (k - 0.5) / nm, (nm - k + 0.5) / nm])
    return 0.0 if zero else center, lo, hi


def _raw_shift(pairs: Pairs, step: float, coarse: bool, k: int) -> tuple[float, float, float]:
    """The change in the metric's unit: HL shift of the raw values (``pairs`` of raw values) with its interval."""
    if step == 0:
        return pairs.order_interval(k)
    if coarse:
        shift, lo, hi = pairs.order_interval(k)
        return shift, lo - step, hi + step
    ea, eb = _rounding_errors(pairs, step, False)
    return _smoothed_interval(pairs, ea, eb, k)


def _expm1(x: float) -> float:
    return math.expm1(x) if math.isfinite(x) else x


EXACT_TOLERANCE = 1e-3  # relative spread within a side still taken as deterministic (ld.so, a clock read)
UNCHECKED_NOTE = ("one run on a side: that the counts repeat is unchecked, so the exact method can call neither "
                  "** nor flat; run 2 per side (the second checks the first)")


def _relative_range(values: np.ndarray) -> float:
    center = abs(float(np.median(values)))
    return float(np.ptp(values)) / center if center else float(np.ptp(values) > 0)


def exact_spread(base: np.ndarray, exp: np.ndarray) -> float:
    """The larger relative range (max - min over |median|) of the two sides; 1 for a varying side of median 0."""
    return max(_relative_range(base), _relative_range(exp))


class AssumeExact:
    """Deterministic counts: any difference beyond the spread seen is real, only the margin decides ``flat``.

    For counts that do not vary between runs of the same binary and input
    (instructions and cache misses from valgrind's simulated caches), one
    run per side suffices and no test is needed: ``delta`` is the ratio of
    the medians and the interval is the range of all pairwise ratios (a
    point when nothing varies), the most the variation seen could move the
    estimate.  Assumption: the values are deterministic, or vary within a
    side by at most ``EXACT_TOLERANCE`` (0.1% of the median: the dynamic
    loader's work depends on the environment and the randomized stack, a
    workload reading a clock formats a few digits more or less).  The
    analysis (``perfab.analyse.compare``) uses this method only where that
    holds, row by row, and judges any other row by the rank method with a
    warning; called directly on varying values it warns.  That needs two
    runs on each side: with one, nothing shows the counts repeat (an A/A of
    a workload whose work varied 3% per run read ``-0.18% **`` at one run
    per side), so the row is ``unchecked`` and can be neither ``**`` nor
    ``flat`` (``verdicts.verdict``): two runs per side, the second checking
    the first, are the least for a verdict.  A baseline of 0
    has no ratio: the change is the difference of the medians in the
    metric's unit (basis ``absolute``), with the range of pairwise
    differences as its interval.  Reference: the same idea as benchstat's
    AssumeExact (golang.org/x/perf/benchmath), which refuses samples that
    differ.
    """

    name = "exact"

    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it (no interval level: the counts do not vary)."""
        return "exact counts (deterministic; only the margin decides flat)"

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        mb, me = float(np.median(base)), float(np.median(exp))
        warnings: list[str] = []
        spread_ = exact_spread(base, exp)
        unchecked = min(len(base), len(exp)) < 2
        if unchecked:
            warnings.append(UNCHECKED_NOTE)
        if spread_ > EXACT_TOLERANCE:

            warnings.append(f"values vary within a side (by {fmt_pct(spread_)}): the exact method assumes "
                            "deterministic counts")
        shift = (me - mb, float(exp.min() - base.max()), float(exp.max() - base.min()))  # extremes of all differences
        if mb == 0:
            est = _estimate(self.name, base, exp, None, None, None, None, warnings, ABSOLUTE, shift, 0.0)
            return replace(est, unchecked=unchecked)
        delta = me / mb - 1
        lo = hi = delta
        if spread_ > 0 and np.all(base != 0):
            ratios = _extreme_ratios(exp, base) - 1
            lo, hi = float(ratios.min()), float(ratios.max())
        basis = RATIO if np.all(base > 0) and np.all(exp > 0) else SHIFT_MEDIAN
        est = _estimate(self.name, base, exp, delta, lo, hi, None, warnings, basis, shift, 0.0)
        return replace(est, unchecked=unchecked)


def _extreme_ratios(exp: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The ratios ``e / b`` that hold the smallest and the largest of all n*m ratios (no 0 in ``base``).

    For fixed b the ratio is monotone in e, and for fixed e it is monotone in
    b on each side of 0, so the extremes are among the extreme values of
    ``exp`` over the extreme values of ``base`` of each sign.
    """
    ends = [x for part in (base[base > 0], base[base < 0]) if len(part) for x in (part.min(), part.max())]
    return np.divide.outer(np.array([exp.min(), exp.max()]), np.array(ends)).ravel()


class AssumeNormal:
    """Welch's t-test on the means, with a Welch interval for the relative difference of means.

    Test: Welch's unequal-variance t-test (Welch 1947), two-sided.  The
    interval is the Welch-Satterthwaite interval of ``mean_exp - mean_base``
    divided by ``mean_base``, which treats the baseline mean as known: good
    when its standard error is small beside the effect; Fieller's interval
    would be exact for the ratio.  Assumptions: independent runs, each
    side's mean approximately normal (many runs, or normal noise).  Use it
    when asked to match a report that used t-tests.  Reference: Welch,
    "The generalization of Student's problem when several different
    population variances are involved", Biometrika 34 (1947) 28-35.
    """

    name = "normal"

    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it."""
        return f"Welch t, {_level(confidence)} intervals"

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        n, m = len(base), len(exp)
        mb, me = float(np.mean(base)), float(np.mean(exp))
        diff = me - mb
        if n < 2 or m < 2:
            return _estimate(self.name, base, exp, None if mb == 0 else diff / abs(mb), -math.inf, math.inf, None,
                             (), ABSOLUTE if mb == 0 else SHIFT_MEDIAN, (diff, -math.inf, math.inf), 0.0)
        vb, ve = np.var(base, ddof=1) / n, np.var(exp, ddof=1) / m
        se = math.sqrt(vb + ve)
        if se == 0:
            p = 1.0 if diff == 0 else 0.0
            lo = hi = diff
        else:
            df = (vb + ve) ** 2 / (vb ** 2 / (n - 1) + ve ** 2 / (m - 1))
            t = stats.t.ppf(0.5 + confidence / 2, df)
            p = float(stats.ttest_ind(exp, base, equal_var=False).pvalue)
            lo, hi = diff - t * se, diff + t * se
        if mb == 0:
            return _estimate(self.name, base, exp, None, None, None, p, (), ABSOLUTE, (diff, lo, hi), 0.0)
        return _estimate(self.name, base, exp, diff / abs(mb), lo / abs(mb), hi / abs(mb), p, (), SHIFT_MEDIAN,
                         (diff, lo, hi), 0.0)


class AssumeSequential:
    """Group-sequential rank test: intervals that stay valid when the runner looks after every block.

    Test: at look k (after ``min_runs``, ``min_runs + 2``, ... runs per
    side) the Hodges-Lehmann interval and rank-sum test of ``nonparametric``
    are taken at the nominal level of a two-sided Lan-DeMets error-spending
    boundary (Pocock type by default) at information fraction
    ``n_k / max_runs``: the repeated confidence intervals of Jennison &
    Turnbull.  Together the intervals of all looks cover the true change
    with probability ``confidence``, whatever rule stops the experiment;
    ``p`` is the repeated p-value, valid at any stopping look.  The
    verdicts and the adjustment across rows (Holm, valid under the
    dependence a common stopping time creates) are made by
    ``perfab.analyse.sequential.decide``, which the runner calls after every
    block; see that module.

    Assumptions: those of ``nonparametric`` (independent runs, a pure shift
    on the log scale), and that the rank statistics of successive looks
    have the joint distribution of a Brownian motion (asymptotically true
    of the rank-sum statistic; the error under monitoring is checked by
    simulation in ``bench/sequential_runs.py``).  The design (``min_runs``,
    ``max_runs``) must be fixed before the first look; without one, the
    samples at hand are taken as the whole plan.

    References: Lan & DeMets, "Discrete sequential boundaries for clinical
    trials", Biometrika 70 (1983) 659-663; Jennison & Turnbull, *Group
    Sequential Methods with Applications to Clinical Trials*, 2000, ch. 9
    (repeated confidence intervals and p-values) and ch. 19 (computing the
    boundaries); Holm, Scand. J. Statist. 6 (1979) 65-70.
    """

    name = "sequential"

    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it; ``sequential`` is the spec's ``runs = "auto"`` settings."""
        if sequential is None:
            return self.name
        return (f"group-sequential rank test, {sequential.spending} error spending over looks after every block "
                f"({sequential.min_runs}..{sequential.max_runs} runs per side); Delta = Hodges-Lehmann ratio, "
                f"{_level(confidence)} repeated intervals valid under monitoring")

    def __init__(self, design=None):
        self.design = design  # perfab.analyse.sequential.Design; None: the samples at hand are the whole plan

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        from perfab.analyse.sequential import sequential_estimate

        return sequential_estimate(base, exp, confidence, self.design, step=step or 0.0)


_BY_NAME = {m.name: m for m in (AssumeNothing(), AssumeExact(), AssumeNormal(), AssumeSequential())}


def method_names() -> tuple[str, ...]:
    """Every method a report row may name: the spec's three and ``sequential``."""
    return tuple(_BY_NAME)


def get_method(name: str):
    """The method a spec names (``perfab.specfile.schema.METHODS``), or ``sequential`` for ``runs = "auto"``."""
    return _BY_NAME[name]


def _level(confidence: float) -> str:
    """A confidence level as the report prints it (``95%``, ``99.5%``)."""

    return fmt_pct(confidence, digits=3)


def _estimate(name, base, exp, delta, lo, hi, p, warnings, basis, shift, rel_step) -> Estimate:
    s, s_lo, s_hi = shift
    return Estimate(name, float(np.median(base)), float(np.median(exp)), float(np.mean(base)),
                    float(np.mean(exp)), delta, lo, hi, p, tuple(warnings), basis, s, s_lo, s_hi, rel_step)


def relative_cv(values: np.ndarray) -> float | None:
    """Robust coefficient of variation: 1.4826 * MAD / |median| (Rousseeuw & Croux 1993)."""
    if len(values) < 2:
        return None
    med = float(np.median(values))
    if med == 0:
        return None
    return 1.4826 * float(np.median(np.abs(values - med))) / abs(med)


def min_detectable_effect(n_base: int, n_exp: int, cv: float, alpha: float, power: float = 0.8,
                          margin: float = 0.0) -> float | None:
    """Smallest relative shift called ``**`` with probability ``power`` (a planning figure).

    ``margin + (t_{1-alpha/2} + t_power) * cv * sqrt(1/n + 1/m) * sqrt(pi/3)``:
    the normal-theory sample-size formula for two means (t quantiles with
    n + m - 2 degrees of freedom), inflated by sqrt(pi/3) for the
    Mann-Whitney test's asymptotic relative efficiency of 3/pi against the
    t-test under normality (Lehmann, *Nonparametrics*, 1975, ch. 2), plus
    the equivalence margin, which the interval must clear for ``**``.
    ``cv`` is the robust CV (``relative_cv``): the rank test shrugs off the
    outliers that would inflate a standard deviation.  A planning figure
    and on the optimistic side: it ignores the FDR adjustment across rows,
    and on timing noise recorded on a 2-core VM (heavier tails than normal)
    the simulated power at the MDE was about 0.5 rather than 0.8;
    ``bench/power.py`` prints both for this machine.
    """
    if n_base < 2 or n_exp < 2 or cv is None:
        return None
    df = n_base + n_exp - 2
    t = stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)
    return margin + t * cv * math.sqrt(1 / n_base + 1 / n_exp) * math.sqrt(math.pi / 3)
