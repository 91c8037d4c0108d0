"""The rank method, ``nonparametric``: Mann-Whitney U with the Hodges-Lehmann shift and its interval."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from perfab.analyse.grid import resolution, under_one_step
from perfab.analyse.methodbase import ABSOLUTE, RATIO, SHIFT_MEDIAN, Estimate, Method, level, make_estimate
from perfab.analyse.pairs import Pairs, triangle_quantiles
from perfab.analyse.ranks import hl_rank, rank_sum_p


class AssumeNothing(Method):
    """Mann-Whitney U test with the Hodges-Lehmann shift and its distribution-free interval.

    Test: the two-sided Wilcoxon-Mann-Whitney rank-sum test, its p-value
    from the exact permutation distribution with mid-ranks for ties up to
    100 values, the normal approximation with tie correction beyond
    (``perfab.analyse.ranks``).

    Effect and interval: the Hodges-Lehmann estimator, the median of all
    n*m pairwise differences, computed on log values when every value is
    positive so it is a ratio (``delta = exp(HL) - 1``), on raw values
    otherwise (``methodbase``: what Delta is).  Its interval is the pair of order
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
        return (f"Mann-Whitney U; Delta = Hodges-Lehmann ratio, {level(confidence)} intervals "
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
            est = make_estimate(self.name, base, exp, math.expm1(shift), _expm1(lo), _expm1(hi), p, warnings,
                                RATIO, raw_shift, rel_step)
        elif median_base == 0:
            est = make_estimate(self.name, base, exp, None, None, None, p, warnings, ABSOLUTE, (shift, lo, hi),
                                rel_step)
        else:
            scale = abs(median_base)
            est = make_estimate(self.name, base, exp, shift / scale, lo / scale, hi / scale, p, warnings,
                                SHIFT_MEDIAN, (shift, lo, hi), rel_step)
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

