"""Verdict rules: which method judges a row, what it must say about its data, and ``**`` / ``flat`` / ``ns``.

``perfab.analyse.compare`` asks these for every row, after the method
(``perfab.analyse.methods``) has computed its estimate:

- ``choose``: a method judges only the rows whose data fit its
  assumption (the exact method only deterministic counts); any other row
  is judged by its declared fallback (the rank test), with a warning;
- ``basis_note``: why a Hodges-Lehmann Delta is a shift over the median,
  not a ratio, when a zero (or a negative value) makes it one;
- ``grid_pair``: on a grid, the p-value the rank method's interval implies;
- ``serial_widening``: the smooth AR(1) widening of the interval and
  p-value together for correlation in run order (``perfab.analyse.serial``);
- ``verdict``: the three-way verdict from one test-interval pair (see the
  ``compare`` module docstring), by the rule of the estimate's method
  (``Method.verdict``): for the tests, ``**`` needs the adjusted p-value
  at most alpha and the interval beyond the margin; the exact method has
  no p-value and its interval alone decides;
- ``Verdict`` (defined in ``methodbase``): the marks a row can carry, one
  enum for the analysis and every report format.

Which of these apply to a row is asked of its method's declared traits
(``perfab.methodtraits``), never of its name.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from perfab.analyse import serial
from perfab.analyse.checks import lag1_autocorrelation
from perfab.analyse.grid import under_one_step
from perfab.analyse.method_exact import exact_verdict  # noqa: F401 (re-exported)
from perfab.analyse.methodbase import SHIFT_MEDIAN, Estimate, Method, Refusal, Verdict
from perfab.analyse.methods import get_method
from perfab.analyse.ranks import _u_cdf


def choose(name: str, base: np.ndarray, exp: np.ndarray) -> tuple[Method, Refusal | None]:
    """The method a row is judged by, and why it is not the one asked for (``Method.refuses``).

    A method applies only where the samples fit its assumption: the exact
    method (``method_exact.AssumeExact``) only where every side's values are
    equal or vary within ``EXACT_TOLERANCE`` of their median.  A row whose
    data break it is judged by the method it declares as its fallback
    (``Traits.fallback``: the rank method), row by row, with the refusal as
    a warning.
    """
    method = get_method(name)
    refusal = method.refuses(base, exp)
    if refusal is None:
        return method, None
    return get_method(method.traits.fallback), refusal


def method_for(name: str, base: np.ndarray, exp: np.ndarray) -> tuple[str, tuple[str, ...]]:
    """``choose`` by name: the name of the method a row is judged by, and the refusal's note."""
    method, refusal = choose(name, base, exp)
    return method.name, (() if refusal is None else (refusal.text,))


NOTE_FACTOR = 1.2  # a widening at least this large is noted on the row


def serial_widening(est: Estimate, method, base: np.ndarray, exp: np.ndarray,
                    confidence: float) -> tuple[Estimate, tuple[str, ...]]:
    """The estimate widened for serial correlation in run order (``perfab.analyse.serial``), with its note.

    Every row of at least ``serial.SERIAL_MIN_N`` runs per side is widened
    (in part below ``serial.FULL_N``: ``serial.phase_in``) by the shrunk
    AR(1) effective sample size of its paired run differences: no test
    decides whether to widen, so the widening grows smoothly with the
    evidence and the runs, and a correlation both sides share (cancelled by the
    interleaved blocks) widens nothing.  The interval is the method's own at
    the widened confidence (at most the range of all pairwise differences)
    and p is widened by the same factor, so for the rank method on
    continuous data the interval excludes 0 exactly when ``p' <= 1 -
    confidence`` (Bauer's pairing kept).  The note is given where the
    widening is at least ``NOTE_FACTOR`` (a smaller one moves no verdict
    much, and independent rows reach it about one time in ten), or, below
    the minimum runs, where the pooled lag-1 correlation is one-sided
    significant at 10% (``serial.SERIAL_Z``).
    """
    found = serial.estimate(base, exp)
    if found is None:
        r1, z = lag1_autocorrelation([base, exp])
        n = (len(base) + len(exp)) / 2
        if z < serial.SERIAL_Z:
            return est, ()
        return est, (f"runs may be correlated in run order (lag-1 autocorrelation {r1:+.2f}, z {z:.1f}), but "
                     f"{n:g} runs per side are too few to estimate it (at least {serial.SERIAL_MIN_N}): not "
                     "widened; run more to check",)
    factor = serial.cap(found.factor, 1 - confidence, len(base), len(exp))
    if factor <= 1.0:
        return est, ()
    out = method.compare(base, exp, 1 - serial.widen(1 - confidence, factor), step=est.step)
    widened = replace(out, p=serial.widen_p(est.p, factor))
    if factor < NOTE_FACTOR:
        return widened, ()
    n = min(len(base), len(exp))
    part = "" if serial.phase_in(n) >= 1 else f", {serial.phase_in(n):.0%} of it at {n} runs per side"
    return widened, (f"runs are correlated in run order (lag-1 autocorrelation {found.rho_hat:+.2f}, "
                     f"{found.z:.1f} standard errors): interval and p widened by {factor:.2f}x "
                     f"(AR(1) effective sample size{part})",)


def grid_pair(est: Estimate, base: np.ndarray, exp: np.ndarray) -> Estimate:
    """On data on a grid, the rank method's p-value replaced by the one its interval implies: one pair.

    On continuous data the Hodges-Lehmann interval inverts the rank test
    (Bauer 1972): it leaves out 0 exactly when ``p <= 1 - confidence``.  On
    a grid the interval is widened for rounding (``methods.AssumeNothing``)
    and the pairing broke: the permutation p was below 0.05 while the 95%
    interval covered 0 in 2-75% of rows (more the coarser the grid).  Here
    p is the smallest ``1 - c`` at which the interval at confidence c
    leaves out 0.  With ``k`` the rank of the order statistics the interval
    uses, ``c_k = 1 - 2 P(U <= k - 1)`` (``ranks.hl_rank``); the intervals
    are nested in k, and ``p = 2 P(U <= k0 - 1)`` for the smallest k0 whose
    interval leaves out 0, read off the interval's own construction
    (``grid_rank``).  So the interval decides and p is its test: ``**``
    needs the adjusted p at most alpha and the interval beyond the margin,
    and with ``confidence = 1 - alpha`` a single row's interval leaves out
    0 exactly when p <= alpha.  The permutation p of no change
    (``ranks.rank_sum_p``) is valid too, and more powerful, but belongs to
    no interval that accounts for rounding.
    """
    if not est.traits.grid_pair or est.resolution == 0 or est.p is None:
        return est
    tails = _u_tails(len(base), len(exp))
    if tails is None:
        return est
    k0 = grid_rank(base, exp, est.step)
    top = int(np.searchsorted(tails, 0.5, side="right"))  # ranks with an interval at some confidence
    return replace(est, p=1.0 if k0 > top else min(1.0, 2 * float(tails[k0 - 1])))


def grid_rank(base: np.ndarray, exp: np.ndarray, step: float) -> int:
    """The smallest rank k whose rounding-aware interval (``methods.AssumeNothing``) leaves out 0.

    The interval of rank k is ``[d_(k) - w, d_(nm+1-k) + w]`` when a side
    shows under three grid values (w the worst rounding error of a
    difference), else the ``(k - 1/2)/nm`` and ``(nm - k + 1/2)/nm``
    quantiles of the mixture of rounding triangles about the differences
    d.  Its lower end is above 0 exactly when fewer than k differences are
    at most w (or the mixture's CDF at 0, F0, is below ``(k - 1/2)/nm``);
    the upper end likewise.  Computed on the scale the method uses (log
    values unless a value lies within a step of 0).  ``step`` is the grid the method used (``Estimate.step``).
    """
    log_scale = bool(np.all(base > 0) and np.all(exp > 0)) and min(base.min(), exp.min()) > step
    a, b = (np.log(base), np.log(exp)) if log_scale else (base, exp)
    d = np.subtract.outer(b, a).ravel()
    nm = len(d)
    h = _rounding_halfwidths(base, exp, step, log_scale)
    if under_one_step(base, step) or under_one_step(exp, step):
        worst = float(h.max())
        k_lo = int(np.sum(d <= worst)) + 1
        k_hi = nm + 1 - int(np.sum(d < -worst))
    else:
        # a zero half-width (a step below float precision of the values) is a point mass: 0, 1/2 or 1 at 0
        z = np.where(h > 0, np.clip(-d / np.where(h > 0, h, 1.0), -1.0, 1.0), -np.sign(d))
        f0 = float(np.where(z < 0, 0.5 * (1 + z) ** 2, 1 - 0.5 * (1 - z) ** 2).mean())
        k_lo = math.floor(nm * f0 + 0.5) + 1
        k_hi = math.floor(nm * (1 - f0) + 0.5) + 1
    return min(k_lo, k_hi)


def _rounding_halfwidths(base: np.ndarray, exp: np.ndarray, step: float, log_scale: bool) -> np.ndarray:
    """Per pairwise difference, the largest error rounding to ``step`` can put into it (n*m <= 2500 here)."""
    if not log_scale:
        return np.full(len(base) * len(exp), float(step))
    err = lambda x: np.log(x / (x - step / 2))  # noqa: E731  the larger of the two one-sided log errors
    return np.add.outer(err(exp), err(base)).ravel()


def _u_tails(n: int, m: int) -> np.ndarray | None:
    """P(U <= u) for u = 0..nm under no difference, as ``ranks.hl_rank`` reads it (None beyond its exact range)."""
    if n * m > 2500 or n == 0 or m == 0:
        return None
    return _u_cdf(n, m)


def basis_note(est: Estimate, base: np.ndarray, exp: np.ndarray) -> tuple[str, ...]:
    """Why a rank-method Delta is a shift over the baseline median rather than a ratio, when it is.

    The Hodges-Lehmann change is a ratio (on log values) only when every
    value is positive and, on a grid, more than one step above 0
    (``methodbase`` module docstring).  One zero among many runs moves the row
    to the shift over the baseline median, which can change the verdict;
    the row says so and why.
    """
    if est.basis != SHIFT_MEDIAN or not est.traits.hodges_lehmann:
        return ()
    low = int(np.sum(base <= 0) + np.sum(exp <= 0))
    why = (f"{low} of {len(base) + len(exp)} values are 0 or negative" if low
           else "values come within one grid step of 0")
    return (f"{why}: Delta is the Hodges-Lehmann shift over the baseline median, not a ratio",)


def verdict(est: Estimate, margin: float, q: float | None, alpha: float) -> Verdict:
    """``**``, ``flat`` or ``ns`` for one estimate, by the rule of the method that made it (``Method.verdict``)."""
    return get_method(est.method).verdict(est, margin, q, alpha)
