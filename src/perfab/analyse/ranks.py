"""Rank-test machinery: the exact permutation p-value with ties and the Hodges-Lehmann ranks.

``rank_sum_p``: the two-sided p-value of the Wilcoxon-Mann-Whitney rank-sum
test from the exact permutation distribution of the rank sum, with mid-ranks
for ties, for up to ``EXACT_MAX_N`` values in all; the normal approximation
with tie correction beyond (Hollander, Wolfe & Chicken, *Nonparametric
Statistical Methods*, 3rd ed., 2014, section 4.1, "ties" and the large-sample
approximation).  The exact distribution is counted by dynamic programming
over subsets (the classical network idea of Mehta, Patel & Tsiatis,
Biometrics 40 (1984) 819-825, in its simplest form): with heavy ties the
normal approximation can be far too small (0.32 below the permutation
p-value on clock-tick data), the permutation p-value is exact whatever the
ties.

The grid data sit on (a clock tick, whole counts) is ``perfab.analyse.grid``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

EXACT_MAX_N = 100  # exact permutation p up to this many values in all


def rank_sum_p(base: np.ndarray, exp: np.ndarray) -> float | None:
    """Two-sided rank-sum p-value (see the module docstring); None when a side is empty."""
    n, m = len(base), len(exp)
    if n == 0 or m == 0:
        return None
    pooled = np.concatenate([base, exp])
    if np.all(pooled == pooled[0]):
        return 1.0
    ranks2 = np.rint(2 * stats.rankdata(pooled)).astype(np.int64)  # doubled mid-ranks are integers
    observed = int(ranks2[n:].sum())
    if n + m <= EXACT_MAX_N:
        return _exact_p(tuple(sorted(ranks2.tolist())), m, observed)
    return float(stats.mannwhitneyu(exp, base, alternative="two-sided", method="asymptotic").pvalue)


def _exact_p(ranks2: tuple[int, ...], m: int, observed: int) -> float:
    dist = _rank_sum_distribution(ranks2, m)
    center = m * (len(ranks2) + 1)  # doubled expected rank sum
    sums = np.arange(len(dist))
    extreme = np.abs(sums - center) >= abs(observed - center) - 1e-9
    return float(min(1.0, dist[extreme].sum()))


@lru_cache(maxsize=128)
def _rank_sum_distribution(ranks2: tuple[int, ...], m: int) -> np.ndarray:
    """P(sum of m of the doubled ranks = s) for every s, all C(N, m) subsets equally likely."""
    total = sum(sorted(ranks2)[-m:]) + 1
    counts = np.zeros((m + 1, total))
    counts[0, 0] = 1.0
    for r in ranks2:  # choose each value or not; numpy buffers the overlapping in-place add
        counts[1:, r:] += counts[:-1, :total - r]
    return counts[m] / math.comb(len(ranks2), m)


def hl_rank(n: int, m: int, confidence: float) -> int:
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
        return int(np.searchsorted(cdf, tail, side="right"))  # P(U <= k-1) <= tail
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
