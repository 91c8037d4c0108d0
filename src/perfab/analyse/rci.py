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
``ranks.resolution``) go through ``AssumeNothing`` itself, which widens the
interval for rounding, and the margin test is the exact permutation
rank-sum test of the samples shifted by the margin (``ranks.rank_sum_p``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from perfab.analyse.methods import ABSOLUTE, RATIO, SHIFT_MEDIAN, AssumeNothing, Estimate
from perfab.analyse.ranks import _u_cdf, hl_rank, rank_sum_p, resolution

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
    basis: str  # ratio | shift/median | absolute (methods module docstring)
    resolution: float  # relative grid step of the data; 0 for continuous data


def look(base: np.ndarray, exp: np.ndarray, margin: float, nu: float, t: float) -> Look:
    """The look at these samples (in run order, a prefix of the row's runs) with nominal level ``nu``."""
    if resolution(base, exp) == 0:
        return _continuous(base, exp, margin, nu, t)
    return _coarse(base, exp, margin, nu, t)


def _continuous(base: np.ndarray, exp: np.ndarray, margin: float, nu: float, t: float) -> Look:
    n, m = len(base), len(exp)
    positive = bool(np.all(base > 0) and np.all(exp > 0))
    a, b = (np.log(base), np.log(exp)) if positive else (base, exp)
    d = np.sort(np.subtract.outer(b, a).ravel())
    k = hl_rank(n, m, 1 - nu)
    shift = float(np.median(d))
    lo, hi = (float(d[k - 1]), float(d[n * m - k])) if k >= 1 else (-math.inf, math.inf)
    basis, scale, up, down = _margin_shifts(base, margin, positive)
    below = int(np.searchsorted(d, up, side="right"))  # differences <= the upper margin
    above = n * m - int(np.searchsorted(d, down, side="left"))  # differences >= the lower margin
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


def _coarse(base: np.ndarray, exp: np.ndarray, margin: float, nu: float, t: float) -> Look:
    est = AssumeNothing().compare(base, exp, 1 - nu)
    if est.basis == ABSOLUTE:
        p = rank_sum_p(base, exp)
        return Look(len(base), len(exp), t, nu, est.shift, est.shift_lo, est.shift_hi, 1.0 if p is None else p,
                    ABSOLUTE, est.resolution)
    pi = min(_shifted_p(base, exp, est, margin, +1), _shifted_p(base, exp, est, margin, -1))
    return Look(len(base), len(exp), t, nu, est.delta, est.lo, est.hi, pi, est.basis, est.resolution)


def _shifted_p(base: np.ndarray, exp: np.ndarray, est: Estimate, margin: float, side: int) -> float:
    """Rank-sum p-value of the experiment side moved back by the margin on one side (1 when on the other)."""
    if est.delta is None or side * est.delta <= margin:
        return 1.0
    if est.basis == RATIO:
        moved = exp / (1 + side * margin)
    else:
        moved = exp - side * margin * abs(float(np.median(base)))
    p = rank_sum_p(base, moved)
    return 1.0 if p is None else p


def _expm1(x: float) -> float:
    return math.expm1(x) if math.isfinite(x) else x
