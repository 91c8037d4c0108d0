"""Diagnostics of samples, returned as warnings (data, never prints).

Each function looks at one side's (or both sides') samples of one metric
and returns a warning string or None.  The report decides how to show them.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from perfab.analyse.grid import exact_step


UNIT_KEYS = {"boot": "measure.boots", "build": "experiment.layout_builds"}  # the key that sets a unit's count


def too_few_runs(n_base: int, n_exp: int, alpha: float, unit: str = "run") -> str | None:
    """The rank test's smallest possible two-sided p-value is 2 / C(n+m, n); warn when it exceeds alpha.

    ``unit`` is what the row counts: runs, or boots when the boot is its unit of replication."""
    if n_base == 0 or n_exp == 0:
        return f"no usable {unit}s on one side"
    if min(n_base, n_exp) >= 40 and alpha > 1e-20:  # C(80, 40) > 1e22: p reaches any such alpha; no bigint
        return None
    smallest = 2 / math.comb(n_base + n_exp, n_base)
    if smallest <= alpha:
        return None
    need = next(k for k in range(2, 100) if 2 / math.comb(2 * k, k) <= alpha)
    how = "run" if unit == "run" else f"plan {unit}s ({UNIT_KEYS.get(unit, unit)})"
    return (f"with {n_base}+{n_exp} {unit}s the rank test can never reach alpha {alpha:g} "
            f"(smallest p {smallest:.2g}); {how} >= {need} per side")


def no_spread(base: np.ndarray, exp: np.ndarray, metric: str) -> str | None:
    """Every run of each side read the same value: a deterministic count judged as a noisy sample.

    A rank test of two constant samples can only reach its smallest p-value, so with few runs it says
    ``ns`` however far apart they are; the exact method judges such counts by the margin alone."""
    if len(base) < 3 or len(exp) < 3 or np.ptp(base) != 0 or np.ptp(exp) != 0:
        return None
    return (f"{metric}: every run of each side read the same value (no spread): a deterministic count? "
            f"declare it with method = \"exact\" in its [[workload.metric]] and the margin alone decides")


def drift(values: np.ndarray, order: np.ndarray, side: str, alpha: float = 0.001) -> str | None:
    """Spearman rank correlation of value against run order within one side (a trend over time).

    A report checks every metric of every side, tens of samples, so the
    level is strict (0.001) to keep false warnings rare across a report.
    """
    if len(values) < 8 or np.ptp(values) == 0:
        return None
    rho, p = trend(values, order)
    if p < alpha and abs(rho) >= 0.5:
        return (f"drift across run order on {side} (Spearman rho {rho:+.2f}, p {p:.2g}): "
                "the machine changed during the runs")
    return None


def trend(values: np.ndarray, order: np.ndarray) -> tuple[float, float]:
    """Spearman's rho of value against run order, and its p-value (``drift`` warns on it)."""
    rho, p = stats.spearmanr(order, values)
    return float(rho), float(p)


def lag1_autocorrelation(sides: list[np.ndarray]) -> tuple[float, float]:
    """Pooled lag-1 autocorrelation in run order within sides, and its z against independence.

    Each side (its values in run order) is replaced by its ranks, centred
    on its own mean, so a shift between sides and outliers do not count;
    the lag-1 products of all sides are pooled over their sums of squares.
    Under independence r1 is about normal with mean -1/n and variance 1/n
    for a series of n (Bartlett's approximation; Box, Jenkins & Reinsel,
    *Time Series Analysis*, 4th ed., 2008, section 2.1.6); pooled over
    sides, ``z = (r1 + 1/n_mean) * sqrt(sum n)``.  Returns (r1, z); (0, 0)
    when no side has 8 runs or none varies.
    """
    num = den = 0.0
    counts = []
    for x in sides:
        if len(x) < 8 or np.ptp(x) == 0:
            continue
        r = stats.rankdata(x)
        r = r - r.mean()
        num += float(np.dot(r[:-1], r[1:]))
        den += float(np.dot(r, r))
        counts.append(len(x))
    if not counts or den == 0:
        return 0.0, 0.0
    r1 = num / den
    return r1, (r1 + len(counts) / sum(counts)) * math.sqrt(sum(counts))


def bimodal(values: np.ndarray, side: str, min_share: float = 0.2, min_d: float = 5.5) -> str | None:
    """Two well separated clusters, by Ashman's D of the best two-cluster split.

    The sorted samples are split where the within-cluster sum of squares
    is smallest (1-D two-means, exact, every split scored at once from
    prefix sums: O(n log n) with the sort); the split counts as bimodal when
    each cluster holds at least ``min_share`` of the runs and Ashman's
    ``D = sqrt(2) |m1 - m2| / sqrt(s1^2 + s2^2)`` exceeds ``min_d``
    (D > 2 is the classical bound for a clean separation of two normal
    components; Ashman, Bird & Zepf, AJ 108 (1994) 2348).  That bound is for
    given components: the best split of a single normal sample already has
    a median D near 3 and a 95th percentile of 5.0 at n = 10 (simulated),
    hence ``min_d`` = 5.5.  Unlike the
    bimodality coefficient it does not fire on the long right tail that
    timing data always have.  Discrete data (a coarse clock, whole counts)
    is not split at neighbouring grid steps, and each cluster's variance
    includes the rounding variance q^2/12, so a grid alone never makes two
    clusters.  Needs at least 20 values: with ``min_d`` 5.5
    a single normal sample is flagged in 0.09% of cases at n = 20 (3% at
    n = 10), few enough across the tens of samples of a report.  A screen,
    not a test.
    """
    n = len(values)
    if n < 20 or np.ptp(values) == 0:
        return None
    x = np.sort(np.asarray(values, dtype=float))
    lo = max(2, int(np.ceil(min_share * n)))
    if lo > n - lo:
        return None
    k = _best_split(x, lo)
    a, b = x[:k], x[k:]
    step = exact_step(x)
    if step and b[0] - a[-1] <= 2 * step:
        return None  # neighbouring steps of a grid (a coarse clock, whole counts) are not two clusters
    # Rounding to a grid of step q adds q^2/12 of variance to each cluster (Sheppard's correction).
    spread = math.sqrt(a.var(ddof=1) + b.var(ddof=1) + step ** 2 / 6)
    d = math.inf if spread == 0 else math.sqrt(2) * abs(b.mean() - a.mean()) / spread
    if d > min_d:
        return (f"{side} samples form two clusters ({len(a)} runs near {a.mean():.4g}, {len(b)} near "
                f"{b.mean():.4g}; Ashman's D {d:.1f}): look at the raw runs")
    return None


def _best_split(x: np.ndarray, lo: int) -> int:
    """The k in [lo, n - lo] whose split x[:k], x[k:] of sorted ``x`` has the least within-cluster sum of squares.

    From prefix sums of the centred values: SSE(k) = sum x^2 - S_k^2 / k -
    (S - S_k)^2 / (n - k), all k at once in O(n).  The first least value
    wins, as in a scan; splits whose sums of squares agree to rounding
    (about 1e-12 of the total) may be told apart differently.
    """
    n = len(x)
    c = x - x.mean()  # centred: the sums stay small, the differences exact enough
    s1 = np.cumsum(c)
    total2 = float(np.dot(c, c))
    k = np.arange(lo, n - lo + 1)
    left = s1[k - 1]
    sse = total2 - left * left / k - (s1[-1] - left) ** 2 / (n - k)
    return int(k[int(np.argmin(sse))])
