"""One row at one look of a sequential experiment: the rank interval and the margin test at a nominal level.

At look ``k`` a group-sequential design allows the fixed-sample level
``nu_k`` (``spending.nominal`` of the look's boundary).  The repeated
confidence interval of the look (Jennison & Turnbull 2000, ch. 9) is then
the ordinary Hodges-Lehmann interval of ``methods.AssumeNothing`` at
confidence ``1 - nu_k``: the pair of order statistics of the pairwise
differences that inverts the rank-sum test (Bauer 1972), on log values
when every value is positive (Delta is a ratio).

The margin test asks whether that interval lies beyond +-margin: its
nominal p-value ``pi`` is the smallest ``nu`` at which the interval at
``1 - nu`` excludes ``[-margin, +margin]``.  For continuous data it is read
off the exact null distribution of the Mann-Whitney count U:
``lo > s`` exactly when ``2 P(U <= #{d <= s}) <= nu``, so the test and the
interval never disagree.  Coarse data (a grid of values:
``grid.resolution``) get ``AssumeNothing``'s interval, widened for
rounding (``_grid_intervals``), and the margin test is the exact
permutation rank-sum test of the samples shifted by the margin
(``ranks.rank_sum_p``), computed only where the interval at the level of
``**`` clears the margin: elsewhere it could not decide anything and
counts as 1 (conservative, and it spares the permutation counts with ties).
The grid is the metric's declared step or the one its values show
(``perfab.analyse.grid``, as in the fixed report).

Serial correlation: a look is widened as a fixed report's row is
(``perfab.analyse.serial``): the shrunk AR(1) factor ``f`` of the runs seen
so far (before 12 runs per side, that of lag-1 correlation 0.6) divides
the normal scores of the margin test's p-value and multiplies those of the
look's nominal levels, so its interval is that of the rank method at
``1 - nu'`` with ``nu' = 2 Phi(-f z_nu)`` (unbounded where no pair of order
statistics reaches that level: the look then decides nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import special

from perfab.analyse import serial
from perfab.analyse.grid import flat_resolution, resolution, under_one_step
from perfab.analyse.method_rank import _rounding_errors
from perfab.analyse.methodbase import ABSOLUTE, RATIO, SHIFT_MEDIAN
from perfab.analyse.pairs import Pairs, triangle_quantiles
from perfab.analyse.ranks import _u_cdf, hl_rank, rank_sum_p

EXACT_U = 2500  # n*m up to which ranks.hl_rank uses the exact distribution of U


@dataclass(frozen=True)
class Look:
    """One row at one look: its interval at the look's nominal level and its margin test."""

    n_base: int  # baseline runs used at this look
    n_exp: int  # experiment runs used
    t: float  # information fraction: nm/(n+m) over its value at max_runs per side, at most 1
    nu: float  # the look's nominal two-sided level: the interval is at confidence 1 - nu
    delta: float | None  # Hodges-Lehmann change (relative; in the metric's unit for basis absolute)
    lo: float  # interval at the look's nominal level, same scale as delta (-inf when unbounded)
    hi: float  # upper end
    pi: float  # nominal p-value of "the change lies beyond the margin"
    basis: str  # ratio | shift/median | absolute (methodbase module docstring)
    resolution: float  # relative step below which flat cannot be shown (the data's grid, a declared clock); 0: none
    factor: float = 1.0  # serial-correlation widening applied (``serial``); 1: none


def look(base: np.ndarray, exp: np.ndarray, margin: float, nu: float, t: float, nu_test: float | None = None,
         declared: float = 0.0) -> Look:
    """The look at these samples (in run order, a prefix of the row's runs) with nominal level ``nu``.

    ``nu_test`` is the look's nominal level at the overall level ``**`` is
    tested at (``nu`` when omitted); on coarse data the exact permutation
    p-value of the margin test is computed only where the interval at that
    level clears the margin, and counts as 1 elsewhere (where it cannot
    decide anything).  ``declared`` is the metric's declared grid step.
    Both levels and the margin test are widened for serial correlation
    (see the module docstring).
    """
    nu_test = nu if nu_test is None else nu_test
    factor = serial.look_factor(base, exp)  # no cap: a look beyond the samples' reach decides nothing
    step = resolution(base, exp, declared=declared, margin=margin)
    wide, wide_test = serial.widen(nu, factor), serial.widen(nu_test, factor)
    if step == 0:
        out = _continuous(base, exp, margin, wide, t)
    else:
        out = _coarse(base, exp, margin, wide, t, wide_test, step)
    flat = flat_resolution(out.resolution, declared, float(np.median(base)))
    return replace(out, nu=nu, pi=serial.widen_p(out.pi, factor), factor=factor, resolution=flat)


def _continuous(base: np.ndarray, exp: np.ndarray, margin: float, nu: float, t: float) -> Look:
    n, m = len(base), len(exp)
    positive = bool(np.all(base > 0) and np.all(exp > 0))
    pairs = Pairs(base, exp, log=positive)  # the n*m differences, never built (perfab.analyse.pairs)
    shift, lo, hi = pairs.order_interval(hl_rank(n, m, 1 - nu))
    basis, scale, up, down = _margin_shifts(base, margin, positive)
    below = pairs.count(up)  # differences <= the upper margin
    above = n * m - pairs.count(down, strict=True)  # differences >= the lower margin
    pi = min(1.0, 2 * _u_tail(below, n, m), 2 * _u_tail(above, n, m))
    rel = (lambda x: _expm1(x)) if basis == RATIO else (lambda x: x / scale)
    return Look(n, m, t, nu, rel(shift), rel(lo), rel(hi), pi, basis, 0.0)


def _margin_shifts(base: np.ndarray, margin: float, positive: bool) -> tuple[str, float, float, float]:
    """(basis, scale of delta, upper and lower margin as shifts of the compared values)."""
    if positive:
        return RATIO, 1.0, math.log1p(margin), math.log1p(-min(margin, 0.999999))
    median = float(np.median(base))
    if median == 0:
        return ABSOLUTE, 1.0, 0.0, 0.0
    scale = abs(median)
    return SHIFT_MEDIAN, scale, margin * scale, -margin * scale


def _u_tail(count: int, n: int, m: int) -> float:
    """P(U <= count) under no difference, consistent with ``ranks.hl_rank`` (exact, or its normal approximation)."""
    if count >= n * m:
        return 1.0
    if n * m <= EXACT_U:
        return float(_u_cdf(n, m)[count])
    sd = math.sqrt(n * m * (n + m + 1) / 12)
    return float(special.ndtr((count + 1 - n * m / 2) / sd))


def _coarse(base: np.ndarray, exp: np.ndarray, margin: float, nu: float, t: float, nu_test: float,
            step: float) -> Look:
    basis, delta, ends, step = _grid_intervals(base, exp, (1 - nu, 1 - nu_test), step)
    (lo, hi), (test_lo, test_hi) = ends
    if basis == ABSOLUTE:
        clears = test_lo > 0 or test_hi < 0
        p = rank_sum_p(base, exp) if clears else 1.0
        return Look(len(base), len(exp), t, nu, delta, lo, hi, 1.0 if p is None else p, basis, step)
    pi = 1.0
    if test_lo > margin or test_hi < -margin:
        pi = _shifted_p(base, exp, basis, delta, margin, 1 if test_lo > margin else -1)
    return Look(len(base), len(exp), t, nu, delta, lo, hi, pi, basis, step)


def _grid_intervals(base: np.ndarray, exp: np.ndarray, confidences: tuple[float, ...], step: float):
    """``AssumeNothing``'s change and intervals on data on a grid, at several confidences at once.

    The same arithmetic as ``methods.AssumeNothing.compare`` (log scale
    unless values come within a step of 0; rounding triangles, or the worst
    rounding error under one step of spread), without its p-value and the
    shift in the metric's unit, which a look does not need.
    Returns (basis, delta, [(lo, hi) per confidence], relative step).
    """
    n, m = len(base), len(exp)
    log_scale = bool(np.all(base > 0) and np.all(exp > 0)) and min(base.min(), exp.min()) > step
    pairs = Pairs(base, exp, log=log_scale)  # the n*m differences, never built (perfab.analyse.pairs)
    ks = [hl_rank(n, m, c) for c in confidences]
    ea, eb = _rounding_errors(pairs, step, log_scale)
    if under_one_step(base, step) or under_one_step(exp, step):
        worst = float(ea.max() + eb.max())
        center = pairs.median()
        ends = [(pairs.kth(k) - worst, pairs.kth(n * m + 1 - k) + worst) if k >= 1 else (-math.inf, math.inf)
                for k in ks]
    else:
        probs = [0.5] + [p for k in ks if k >= 1 for p in ((k - 0.5) / (n * m), (n * m - k + 0.5) / (n * m))]
        q = iter(triangle_quantiles(pairs, ea, eb, probs))
        center = next(q)
        center = center if pairs.median() != 0 else 0.0  # a raw estimate of exactly 0 stays 0
        ends = [(next(q), next(q)) if k >= 1 else (-math.inf, math.inf) for k in ks]
    median = float(np.median(base))
    rel_step = step / abs(median) if median else math.inf
    if log_scale:
        return RATIO, math.expm1(center), [(_expm1(lo), _expm1(hi)) for lo, hi in ends], rel_step
    if median == 0:
        return ABSOLUTE, center, ends, rel_step
    scale = abs(median)
    return SHIFT_MEDIAN, center / scale, [(lo / scale, hi / scale) for lo, hi in ends], rel_step


def _shifted_p(base: np.ndarray, exp: np.ndarray, basis: str, delta: float, margin: float, side: int) -> float:
    """Rank-sum p-value of the experiment side moved back by the margin on one side (1 when on the other)."""
    if side * delta <= margin:
        return 1.0
    if basis == RATIO:
        moved = exp / (1 + side * margin)
    else:
        moved = exp - side * margin * abs(float(np.median(base)))
    p = rank_sum_p(base, moved)
    return 1.0 if p is None else p


def _expm1(x: float) -> float:
    return math.expm1(x) if math.isfinite(x) else x
