"""Serial correlation in run order, and the widening it calls for: a shrunk AR(1) effective sample size.

Runs correlated in time (a slowly wandering machine, AR(1) with rho 0.5)
made the rank test call an A/A change `**` 7 times as often as independent
runs (0.21 against 0.03 at n = 20).  The fixed report and every look of a
sequential experiment ask ``estimate`` the same way.

What is estimated.  The variance that matters is that of the difference
between the sides.  With interleaved blocks (ABBA) the i-th run of each side
ran next to each other, so a disturbance both sides share (the machine
wandering) cancels from the paired differences and needs no widening, while
each side's own correlation stays in them.  ``estimate`` therefore reads
the lag-1 autocorrelation of the paired difference series, on ranks (an
outlier does not count).  That series holds half the information of the
two sides' own series, so where the sides share nothing the pooled
within-side estimate (the same quantity then, with half the variance) is
used: the weight of the difference series is the positive-part
James-Stein factor ``(1 - 1/z0^2)+`` of the concurrent rank correlation of
the paired runs (z0 its normal score; James & Stein 1961), which grows
smoothly with the evidence that the sides share a disturbance.  The
estimate is corrected for its small-sample bias
(``E r1 ~ rho - (1 + 4 rho) / n``; Marriott & Pope, Biometrika 41 (1954)
390-402), giving ``rho_hat`` with standard error
``se = sqrt(1 / N) * n / (n - 4)`` for N series values.

The widening.  With lag-1 correlation rho the variance of a side's mean,
and close to it of its rank sum, grows by ``(1 + rho) / (1 - rho)``: the
AR(1) effective sample size (Bayley & Hammersley, JRSS Suppl. 8 (1946)
184-197; for tests under serial correlation Zwiers & von Storch,
J. Climate 8 (1995) 336-351).  rho is taken shrunk and smooth in the
evidence, ``rho_used = min(RHO_CAP, SLOPE * (rho_hat - SHRINK * se)+)``: a
soft threshold (Donoho & Johnstone, Biometrika 81 (1994) 425-455) that
leaves independent rows almost untouched and grows continuously with
rho_hat, steeper than 1 because rows whose rho_hat falls short of the true
rho would otherwise be under-widened (their extra false `**` is what the
over-widened ones must pay for).  SHRINK and SLOPE are calibrated by
simulation on AR(1) noise, as Zwiers & von Storch calibrate their table
look-up test, so that A/A stays at alpha up to rho 0.6 at 20 runs per side
(``bench/verdict_rules.py`` prints the figures).  The test's normal score
is divided by ``f = sqrt((1 + rho_used) / (1 - rho_used))``,
``p' = 2 Phi(-z_p / f)``, and the interval is the method's own at the
confidence whose normal score is ``f`` times the asked one's (``widen``),
so the interval and p stay one pair.  ``f`` never exceeds what the samples
can express (``cap``): the widened interval is at most the range of all
pairwise differences, never infinite.

Below ``SERIAL_MIN_N`` runs per side rho cannot be estimated (the bias
correction divides by n - 4).  A fixed report then widens nothing and says
so when the runs look correlated; from there its rows get a share of the
widening that grows linearly to the whole of it at ``FULL_N`` runs per side
(``phase_in``), so that adding runs never takes power away at the threshold.  A sequential look cannot leave it at
that, since the runner stops on what the look says, with no one to read a
warning: unwidened looks at 6, 8 and 10 runs per side alone called a false
`**` in 19% of A/A experiments at lag-1 correlation 0.6.  Such a look
assumes ``EARLY_RHO``, the largest correlation the A/A guarantee covers,
so before 12 runs per side only an extreme change is `**`; deterministic
counts (the exact method) are still decided at once.  From 12 runs on the
look's estimate is pulled towards that prior, less with every run
(``look_factor``): at lag-1 correlation 0.6 the looks at 12 and 14 runs,
taken at the bare estimate, still called a false `**` in 5% of A/A
experiments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

SERIAL_MIN_N = 12  # runs per side below which rho is not estimated
SERIAL_Z = 1.2816  # normal score of the pooled lag-1 correlation above which a short row is warned about
SHRINK = 0.75  # standard errors of rho_hat taken off before it counts (soft threshold)
SLOPE = 2.0  # growth of rho_used with rho_hat above the threshold
RHO_CAP = 0.8  # the most rho_used may be (a variance factor of 9, f = 3)
FULL_N = 20  # runs per side from which a fixed report's row gets the whole widening (``phase_in``)
EARLY_RHO = 0.6  # a sequential look before SERIAL_MIN_N runs per side assumes this correlation (f = 2)


@dataclass(frozen=True)
class Serial:
    """The run-order correlation of one comparison and the widening it calls for."""

    rho_hat: float  # lag-1 autocorrelation estimate, bias-corrected (before shrinking)
    se: float  # its standard error
    shared: float  # weight of the paired difference series (0: the sides' own series; 1: the differences)
    rho: float  # the shrunk rho the widening uses
    factor: float  # f: normal scores are divided by it (1: no widening)

    @property
    def z(self) -> float:
        """The evidence of correlation: rho_hat over its standard error."""
        return self.rho_hat / self.se if self.se > 0 else 0.0


def estimate(base: np.ndarray, exp: np.ndarray) -> Serial | None:
    """The correlation of the sides' runs (each in run order) and its widening; None below SERIAL_MIN_N runs."""
    n = min(len(base), len(exp))
    if n < SERIAL_MIN_N or np.ptp(base) == 0 or np.ptp(exp) == 0:
        return None
    rb, re = _centred_ranks(base), _centred_ranks(exp)
    within = (_lag1(rb) + _lag1(re)) / (_lag0(rb) + _lag0(re))
    d = _differences(np.asarray(base[:n], float), np.asarray(exp[:n], float))
    rd = _centred_ranks(d)
    diff = _lag1(rd) / _lag0(rd) if _lag0(rd) > 0 else 0.0
    z0 = _concurrent(rb[:n] if len(base) == n else _centred_ranks(base[:n]),
                     re[:n] if len(exp) == n else _centred_ranks(exp[:n])) * math.sqrt(n)
    w = max(0.0, 1 - 1 / z0 ** 2) if z0 > 1 else 0.0
    r1 = w * diff + (1 - w) * within
    length = (len(base) + len(exp)) / 2
    rho_hat = (length * r1 + 1) / (length - 4)
    se = math.sqrt(1 / (w * n + (1 - w) * (len(base) + len(exp)))) * length / (length - 4)
    rho = shrunk(rho_hat, se) * phase_in(n)
    return Serial(rho_hat, se, w, rho, _factor(rho))


def phase_in(n: int) -> float:
    """The share of the widening a fixed report's row of ``n`` runs per side gets: 1/9 at 12 runs, all from 20.

    Below ``SERIAL_MIN_N`` nothing is widened; switching the whole widening
    on at 12 runs made power fall as runs were added (+2% at CV 1%: `**`
    0.98 at 11 runs per side, 0.93 at 12), so it grows linearly to
    ``FULL_N``, where the A/A figures of ``bench/verdict_rules.py`` are
    met.  Rows of 12 to 19 runs per side are protected in part, and a row
    under 12 only warned about.
    """
    return min(1.0, max(0.0, (n - SERIAL_MIN_N + 1) / (FULL_N - SERIAL_MIN_N + 1)))


def shrunk(rho_hat: float, se: float) -> float:
    """The rho the widening uses: soft-thresholded by SHRINK standard errors, grown by SLOPE, capped."""
    return min(RHO_CAP, SLOPE * max(0.0, rho_hat - SHRINK * se))


def _factor(rho: float) -> float:
    """The AR(1) effective-sample-size factor on normal scores, sqrt((1 + rho) / (1 - rho))."""
    return math.sqrt((1 + rho) / (1 - rho))


def _centred_ranks(x: np.ndarray) -> np.ndarray:
    r = stats.rankdata(x)
    return r - r.mean()


def _lag1(r: np.ndarray) -> float:
    return float(np.dot(r[:-1], r[1:]))


def _lag0(r: np.ndarray) -> float:
    return float(np.dot(r, r))


def _concurrent(ra: np.ndarray, rb: np.ndarray) -> float:
    """Spearman correlation of the paired runs (0 when a side does not vary)."""
    den = math.sqrt(_lag0(ra) * _lag0(rb))
    return float(np.dot(ra, rb)) / den if den > 0 else 0.0


def _differences(base: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """The paired runs' differences, of log values when every value is positive (a shared factor cancels)."""
    if np.all(base > 0) and np.all(exp > 0):
        return np.log(exp) - np.log(base)
    return exp - base


def look_factor(base: np.ndarray, exp: np.ndarray) -> float:
    """The widening of a sequential look (see the module docstring); 1 when a side does not vary.

    Before ``SERIAL_MIN_N`` runs per side: ``EARLY_RHO``'s.  From there the
    estimate is pulled towards ``EARLY_RHO`` as a prior worth
    ``SERIAL_MIN_N`` runs per side (weights: the runs of both sides against
    ``2 * SERIAL_MIN_N``), so the widening eases smoothly as runs come in
    instead of dropping to a noisy estimate at the first look that has one.
    """
    if np.ptp(base) == 0 or np.ptp(exp) == 0:
        return 1.0
    found = estimate(base, exp)
    if found is None:
        return _factor(EARLY_RHO)
    prior, data = 2 * SERIAL_MIN_N, len(base) + len(exp)
    return _factor(shrunk((prior * EARLY_RHO + data * found.rho_hat) / (prior + data), found.se))


def cap(factor: float, level: float, n: int, m: int) -> float:
    """``factor`` held where the rank test's widened level is still one the samples can reach.

    The smallest two-sided level a rank interval of n and m values reaches
    is ``2 / C(n + m, n)`` (the range of all pairwise differences); beyond it
    the interval would be infinite.
    """
    if n == 0 or m == 0 or not 0 < level < 1:
        return factor
    smallest = 2 * math.exp(-_log_comb(n + m, n)) * (1 + 1e-6)  # a hair above: the order statistic stays in reach
    if smallest >= level:
        return 1.0
    return min(factor, float(special.ndtri(1 - smallest / 2)) / float(special.ndtri(1 - level / 2)))


def _log_comb(a: int, b: int) -> float:
    return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)


def widen(level: float, factor: float) -> float:
    """A two-sided level (1 - confidence, or a p-value) whose normal score is ``factor`` times larger."""
    if factor == 1.0 or not 0 < level < 1:
        return level
    return float(2 * special.ndtr(-factor * special.ndtri(1 - level / 2)))


def widen_p(p: float | None, factor: float) -> float | None:
    """A p-value whose normal score is divided by ``factor``: ``2 Phi(-z_p / f)``."""
    if p is None or factor == 1.0 or not 0 < p < 1:
        return p
    return float(2 * special.ndtr(-special.ndtri(1 - p / 2) / factor))
