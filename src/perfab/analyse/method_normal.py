"""The normal method, ``normal``: Welch's t-test on the means."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from perfab.analyse.methodbase import ABSOLUTE, SHIFT_MEDIAN, Estimate, Method, level, make_estimate


class AssumeNormal(Method):
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
    Its minimum detectable effect is the rank test's planning figure
    (``Method.mde``), which for a t-test under normality is larger by
    sqrt(pi/3): on the cautious side.
    """

    name = "normal"

    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it."""
        return f"Welch t, {level(confidence)} intervals"

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        n, m = len(base), len(exp)
        mb, me = float(np.mean(base)), float(np.mean(exp))
        diff = me - mb
        if n < 2 or m < 2:
            return make_estimate(self.name, base, exp, None if mb == 0 else diff / abs(mb), -math.inf, math.inf, None,
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
            return make_estimate(self.name, base, exp, None, None, None, p, (), ABSOLUTE, (diff, lo, hi), 0.0)
        return make_estimate(self.name, base, exp, diff / abs(mb), lo / abs(mb), hi / abs(mb), p, (), SHIFT_MEDIAN,
                             (diff, lo, hi), 0.0)

