"""Statistical methods: each compares one metric's samples, experiment side against baseline.

A method is a named object with a docstring stating its test, its
assumptions and why it is used, so a reader can check every verdict.  All
return an ``Estimate``: centers, the relative delta with its confidence
interval (at ``confidence``, e.g. 0.95) and a two-sided p-value.  ``alpha``
(the significance level, e.g. 0.05) is not a method parameter: the report
applies it after the false-discovery-rate adjustment across rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats


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


class AssumeNothing:
    """Mann-Whitney U test with the Hodges-Lehmann shift and its distribution-free interval.

    Test: the two-sided Mann-Whitney U (Wilcoxon rank-sum) test of whether
    one side's values tend to be larger (scipy's implementation: exact null
    distribution for small samples without ties, the normal approximation
    with tie correction otherwise).

    Effect and interval: the Hodges-Lehmann estimator, the median of all
    n*m pairwise differences, computed on log values so it is a *ratio*:
    ``delta = exp(HL) - 1``.  Its interval is the pair of order statistics
    of those differences that inverts the same U test (Bauer 1972), so the
    interval excludes zero exactly when the test rejects: the verdict and
    the p-value never disagree.  Metrics with zero or negative values use
    raw differences divided by the baseline median instead.

    Assumptions: runs are independent and, under the null hypothesis, the
    two sides' distributions have the same shape (a pure shift on the log
    scale).  No normality; robust to the long right tails and outliers that
    timing data have.  Why: per-run performance noise is rarely normal, and
    a maintainer can check a rank test without trusting a model.

    References: Hollander, Wolfe & Chicken, *Nonparametric Statistical
    Methods*, 3rd ed., 2014, sections 4.1-4.3; Bauer, "Constructing
    confidence sets using rank statistics", JASA 67 (1972) 687-690.
    """

    name = "nonparametric"

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float) -> Estimate:
        n, m = len(base), len(exp)
        positive = bool(np.all(base > 0) and np.all(exp > 0))
        a, b = (np.log(base), np.log(exp)) if positive else (base, exp)
        diffs = np.sort(np.subtract.outer(b, a).ravel())
        k = _hl_rank(n, m, confidence)
        shift = float(np.median(diffs))
        lo = float(diffs[k - 1]) if k >= 1 else -math.inf
        hi = float(diffs[n * m - k]) if k >= 1 else math.inf
        p = float(stats.mannwhitneyu(exp, base, alternative="two-sided").pvalue) if n and m else None
        if np.all(diffs == 0):
            p = 1.0
        scale = _relative(positive, float(np.median(base)))
        if scale is None:  # baseline median 0: no relative change, unless nothing changed at all
            same = 0.0 if np.all(diffs == 0) else None
            return _estimate(self.name, base, exp, same, same, same, p)
        return _estimate(self.name, base, exp, scale(shift), scale(lo), scale(hi), p)


EXACT_TOLERANCE = 1e-4  # relative spread within a side tolerated as deterministic (timer reads in the workload)


def _relative_range(values: np.ndarray) -> float:
    center = abs(float(np.median(values)))
    return float(np.ptp(values)) / center if center else float(np.ptp(values) > 0)


class AssumeExact:
    """Deterministic counts: any difference is real, only the margin decides ``flat``.

    For counts that do not vary between runs of the same binary and input
    (instructions and cache misses from valgrind's simulated caches), one
    run per side suffices and no test is needed: ``delta`` is the ratio of
    the medians and the interval is that point.  Assumption: the values are
    deterministic; when a side's values vary by more than ``EXACT_TOLERANCE``
    (0.01%: a workload reading a clock executes a few instructions more or
    less), a warning says so; any variation widens the interval to the
    range of all pairwise ratios, the most it could move the estimate.  Reference: the same idea
    as benchstat's AssumeExact (golang.org/x/perf/benchmath).
    """

    name = "exact"

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float) -> Estimate:
        mb, me = float(np.median(base)), float(np.median(exp))
        warnings: list[str] = []
        if mb == 0:
            delta = 0.0 if me == 0 else None
            return _estimate(self.name, base, exp, delta, delta, delta, None)
        delta = me / mb - 1
        lo = hi = delta
        spread = max(_relative_range(base), _relative_range(exp))
        if spread > EXACT_TOLERANCE:
            warnings.append(f"values vary within a side (by {100 * spread:.2g}%): the exact method assumes "
                            "deterministic counts")
        if spread > 0:
            ratios = np.divide.outer(exp, base).ravel() - 1 if np.all(base != 0) else np.array([delta])
            lo, hi = float(ratios.min()), float(ratios.max())
        return _estimate(self.name, base, exp, delta, lo, hi, None, tuple(warnings))


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

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float) -> Estimate:
        n, m = len(base), len(exp)
        mb, me = float(np.mean(base)), float(np.mean(exp))
        if n < 2 or m < 2 or mb == 0:
            return _estimate(self.name, base, exp, None if mb == 0 else me / mb - 1, -math.inf, math.inf, None)
        vb, ve = np.var(base, ddof=1) / n, np.var(exp, ddof=1) / m
        se = math.sqrt(vb + ve)
        if se == 0:
            d = me / mb - 1
            return _estimate(self.name, base, exp, d, d, d, 1.0 if d == 0 else 0.0)
        df = (vb + ve) ** 2 / (vb ** 2 / (n - 1) + ve ** 2 / (m - 1))
        t = stats.t.ppf(0.5 + confidence / 2, df)
        p = float(stats.ttest_ind(exp, base, equal_var=False).pvalue)
        diff = me - mb
        return _estimate(self.name, base, exp, diff / mb, (diff - t * se) / abs(mb), (diff + t * se) / abs(mb), p)


METHODS = {m.name: m for m in (AssumeNothing(), AssumeExact(), AssumeNormal())}


def get_method(name: str):
    return METHODS[name]


def _estimate(name, base, exp, delta, lo, hi, p, warnings=()) -> Estimate:
    return Estimate(name, float(np.median(base)), float(np.median(exp)), float(np.mean(base)),
                    float(np.mean(exp)), delta, lo, hi, p, tuple(warnings))


def _relative(log_scale: bool, median_base: float):
    """Map a shift to a relative change: exp() for log shifts, / |median| for raw ones."""
    if log_scale:
        return lambda s: math.expm1(s) if math.isfinite(s) else s
    if median_base == 0:
        return None
    return lambda s: s / abs(median_base)


def _hl_rank(n: int, m: int, confidence: float) -> int:
    """The 1-based rank k such that [d_(k), d_(nm+1-k)] covers the shift with ``confidence``.

    Exact for n*m <= 2500 (the null distribution of U counted from the
    Gaussian binomial coefficient), normal approximation beyond.  0 means
    the samples are too small for any finite interval at this confidence.
    """
    if n == 0 or m == 0:
        return 0
    tail = (1 - confidence) / 2
    if n * m <= 2500:
        cdf = _u_cdf(n, m)
        k = int(np.searchsorted(cdf, tail, side="right"))  # P(U <= k-1) <= tail
        return k
    z = stats.norm.ppf(1 - tail)
    return max(0, int(math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))))


@lru_cache(maxsize=256)
def _u_cdf(n: int, m: int) -> np.ndarray:
    """Cumulative null distribution of the Mann-Whitney U statistic, P(U <= u) for u = 0..nm."""
    counts = [1]  # coefficients of the Gaussian binomial [n+m choose n]_q
    for i in range(1, n + 1):
        counts = _poly_mul(counts, [1] + [0] * (m + i - 1) + [-1])  # (1 - q^(m+i))
        counts = _poly_div_1_minus_qk(counts, i)  # / (1 - q^i)
    total = math.comb(n + m, n)
    return np.cumsum(np.array(counts[: n * m + 1], dtype=float)) / total


def _poly_mul(a: list[int], b: list[int]) -> list[int]:
    out = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                if y:
                    out[i + j] += x * y
    return out


def _poly_div_1_minus_qk(a: list[int], k: int) -> list[int]:
    """Exact division of polynomial ``a`` by (1 - q^k)."""
    out = list(a)
    for i in range(k, len(out)):
        out[i] += out[i - k]
    while len(out) > 1 and out[-1] == 0:
        out.pop()
    return out


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
