"""The exact method, ``exact``: deterministic counts, whose interval alone decides."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from perfab.analyse.methodbase import (ABSOLUTE, RATIO, SHIFT_MEDIAN, Estimate, Method, Refusal, Verdict, inside,
                                       make_estimate)
from perfab.units import fmt_pct

EXACT_TOLERANCE = 1e-3  # relative spread within a side still taken as deterministic (ld.so, a clock read)
UNCHECKED_NOTE = ("one run on a side: that the counts repeat is unchecked, so the exact method can call neither "
                  "** nor flat; run 2 per side (the second checks the first)")


def _relative_range(values: np.ndarray) -> float:
    center = abs(float(np.median(values)))
    return float(np.ptp(values)) / center if center else float(np.ptp(values) > 0)


def exact_spread(base: np.ndarray, exp: np.ndarray) -> float:
    """The larger relative range (max - min over |median|) of the two sides; 1 for a varying side of median 0."""
    return max(_relative_range(base), _relative_range(exp))


class AssumeExact(Method):
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
    ``flat`` (``exact_verdict``): two runs per side, the second checking
    the first, are the least for a verdict (``Traits.min_runs``).  A baseline of 0
    has no ratio: the change is the difference of the medians in the
    metric's unit (basis ``absolute``), with the range of pairwise
    differences as its interval.  Reference: the same idea as benchstat's
    AssumeExact (golang.org/x/perf/benchmath), which refuses samples that
    differ.  It has no p-value and no per-run noise: its rows take no part
    in the adjustment across rows, and it has no minimum detectable effect.
    """

    name = "exact"

    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it (no interval level: the counts do not vary)."""
        return "exact counts (deterministic; only the margin decides flat)"

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        mb, me = float(np.median(base)), float(np.median(exp))
        warnings: list[str] = []
        spread_ = exact_spread(base, exp)
        unchecked = min(len(base), len(exp)) < self.traits.min_runs
        if unchecked:
            warnings.append(UNCHECKED_NOTE)
        if spread_ > EXACT_TOLERANCE:
            warnings.append(f"values vary within a side (by {fmt_pct(spread_)}): the exact method assumes "
                            "deterministic counts")
        shift = (me - mb, float(exp.min() - base.max()), float(exp.max() - base.min()))  # extremes of all differences
        if mb == 0:
            est = make_estimate(self.name, base, exp, None, None, None, None, warnings, ABSOLUTE, shift, 0.0)
            return replace(est, unchecked=unchecked)
        delta = me / mb - 1
        lo = hi = delta
        if spread_ > 0 and np.all(base != 0):
            ratios = _extreme_ratios(exp, base) - 1
            lo, hi = float(ratios.min()), float(ratios.max())
        basis = RATIO if np.all(base > 0) and np.all(exp > 0) else SHIFT_MEDIAN
        est = make_estimate(self.name, base, exp, delta, lo, hi, None, warnings, basis, shift, 0.0)
        return replace(est, unchecked=unchecked)

    def refuses(self, base: np.ndarray, exp: np.ndarray) -> Refusal | None:
        """Counts that vary within a side by more than ``EXACT_TOLERANCE``: the rank test judges them.

        Called exact, an A/A run of a workload with a random or time-dependent
        path (threads under valgrind) read ``-0.33% **``.
        """
        spread = exact_spread(base, exp)
        if spread <= EXACT_TOLERANCE:
            return None
        return Refusal(f"counts vary within a side by {100 * spread:.2g}% (the exact method tolerates "
                       f"{100 * EXACT_TOLERANCE:g}%): judged by the rank test ({self.traits.fallback}), not as "
                       "deterministic counts", {"spread": spread})

    def verdict(self, est: Estimate, margin: float, q: float | None, alpha: float) -> Verdict:
        """``exact_verdict``: the interval against the margin; there is no p-value."""
        return exact_verdict(est, margin)

    def mde(self, n_base: int, n_exp: int, cv: float | None, alpha: float, margin: float) -> float | None:
        """None: deterministic counts have no per-run noise to detect a change through."""
        return None


def exact_verdict(est: Estimate, margin: float) -> Verdict:
    """The exact method's verdict: its interval (all pairwise ratios, or differences) against the margin.

    ``**`` when the whole interval lies beyond the margin, and, when values
    vary at all, beyond ``EXACT_TOLERANCE`` too: a spread the method
    tolerates within a side never makes a change on its own.  ``flat`` when
    it lies inside +-margin; ``ns`` otherwise.  With a baseline median of 0
    the interval is of differences in the metric's unit, and ``flat`` needs
    it to be exactly 0.  A row with one run on a side is ``unchecked``: no
    run showed that the counts repeat, so it is ``ns`` whatever its values.
    The sequential design decides its exact rows by this same rule.
    """
    if est.unchecked:
        return Verdict.NS
    if est.basis == ABSOLUTE:
        lo, hi = est.shift_lo, est.shift_hi
        if lo is None or hi is None:
            return Verdict.NS
        return Verdict.CHANGE if lo > 0 or hi < 0 else (Verdict.FLAT if lo == hi == 0 else Verdict.NS)
    if est.delta is None or est.lo is None or est.hi is None or not math.isfinite(est.delta):
        return Verdict.NS
    bound = margin if est.lo == est.hi else max(margin, EXACT_TOLERANCE)
    if est.lo > bound or est.hi < -bound:
        return Verdict.CHANGE
    return Verdict.FLAT if inside(est, margin) else Verdict.NS


def _extreme_ratios(exp: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The ratios ``e / b`` that hold the smallest and the largest of all n*m ratios (no 0 in ``base``).

    For fixed b the ratio is monotone in e, and for fixed e it is monotone in
    b on each side of 0, so the extremes are among the extreme values of
    ``exp`` over the extreme values of ``base`` of each sign.
    """
    ends = [x for part in (base[base > 0], base[base < 0]) if len(part) for x in (part.min(), part.max())]
    return np.divide.outer(np.array([exp.min(), exp.max()]), np.array(ends)).ravel()

