"""Group-sequential boundaries from an error-spending function (Lan & DeMets 1983).

An experiment that looks at its data after every block and stops when the
answer looks good must pay for the looks: a test at the fixed-sample level
after each of ten looks calls a null difference significant about four
times as often as it should.  The error-spending approach gives each look
a share of the two-sided level ``alpha``: ``spend(alpha, t)`` is the error
allowed by information fraction ``t`` (0 < t <= 1, the share of the planned
maximum information seen so far), and look ``k`` gets
``spend(alpha, t_k) - spend(alpha, t_{k-1})``.  Neither the number of looks
nor their times need to be fixed in advance, only the spending function and
the maximum information (``max_runs``).

The boundary ``c_k`` of look ``k`` (on the z scale, two-sided) is found so
that, for standardised statistics ``Z_k`` with the canonical joint
distribution of a Brownian motion observed at ``t_1 < ... < t_K``
(``Z_k = W(t_k) / sqrt(t_k)``; any efficient statistic with independent
increments, the rank-sum statistic among them, asymptotically), the
probability of first crossing ``+-c_k`` at look ``k`` equals the error
spent there.  The probabilities are computed by the recursive numerical
integration of Armitage, McPherson & Rowe (1969) as laid out by Jennison &
Turnbull (2000, ch. 19): the density of ``W(t_k)`` on the continuation
region is carried from look to look on a grid (Simpson's rule) and
convolved with the normal density of the increment.

Spending functions (two-sided, symmetric):

- ``pocock``: ``alpha * ln(1 + (e - 1) t)``, Pocock-type (Lan & DeMets 1983):
  nearly constant boundaries, early decisions cheap; the default;
- ``obrien-fleming``: ``4 (1 - Phi(z_{1-alpha/4} / sqrt(t)))``, the
  O'Brien-Fleming type at alpha/2 per side: little error spent early, the
  final boundary close to the fixed-sample one;
- ``linear``: ``alpha * t`` (Kim & DeMets 1987, rho = 1), in between.

References: Lan & DeMets, "Discrete sequential boundaries for clinical
trials", Biometrika 70 (1983) 659-663; Armitage, McPherson & Rowe,
"Repeated significance tests on accumulating data", JRSS A 132 (1969)
235-244; Jennison & Turnbull, *Group Sequential Methods with Applications
to Clinical Trials*, Chapman & Hall/CRC, 2000, chapters 2, 7, 9 and 19;
Kim & DeMets, "Design and analysis of group sequential tests based on the
type I error spending rate function", Biometrika 74 (1987) 149-154.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special

GRID = 201  # points of the continuation region carried between looks (odd, for Simpson's rule)
NEVER = 12.0  # z boundary of a look that spends nothing: crossing it has probability ~1e-33
LEVELS = tuple(float(x) for x in np.geomspace(1e-8, 0.5, 78))  # levels of the repeated-p-value table


def _pocock(alpha: float, t: float) -> float:
    return alpha * math.log(1 + (math.e - 1) * t)


def _obrien_fleming(alpha: float, t: float) -> float:
    return 4 * float(special.ndtr(special.ndtri(alpha / 4) / math.sqrt(t)))


def _linear(alpha: float, t: float) -> float:
    return alpha * t


SPENDING = {"pocock": _pocock, "obrien-fleming": _obrien_fleming, "linear": _linear}


def spent(spending: str, alpha: float, t: float) -> float:
    """Two-sided error spent by information fraction ``t`` (1 at and beyond the planned maximum)."""
    return SPENDING[spending](alpha, min(1.0, t))


def _pdf(z: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _simpson(x: np.ndarray) -> np.ndarray:
    """Simpson weights along the last axis of equally spaced grids."""
    w = np.ones(x.shape[-1])
    w[1:-1:2], w[2:-1:2] = 4, 2
    return w * (x[..., -1:] - x[..., :1]) / (3 * (x.shape[-1] - 1))


class _Walk:
    """Sub-densities of W(t) on the continuation regions of several designs at once, carried from look to look."""

    def __init__(self, t: float, b: np.ndarray):
        self.t = t
        self.x = np.linspace(-b, b, GRID, axis=-1)  # (designs, GRID)
        self.f = _pdf(self.x / math.sqrt(t)) / math.sqrt(t)

    def crossing(self, t: float, b: np.ndarray) -> np.ndarray:
        """Per design: P(continue so far, then |W(t)| >= b)."""
        return self.crossing_slope(t, b)[0]

    def crossing_slope(self, t: float, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The crossing probabilities and their derivatives in ``b``."""
        sd, w = math.sqrt(t - self.t), _simpson(self.x) * self.f
        up, down = (self.x - b[:, None]) / sd, (-b[:, None] - self.x) / sd
        value = np.sum(w * (special.ndtr(up) + special.ndtr(down)), axis=-1)
        return value, -np.sum(w * (_pdf(up) + _pdf(down)), axis=-1) / sd

    def advance(self, t: float, b: np.ndarray) -> None:
        sd, w = math.sqrt(t - self.t), _simpson(self.x) * self.f
        y = np.linspace(-b, b, GRID, axis=-1)
        kernel = _pdf((y[:, :, None] - self.x[:, None, :]) / sd) / sd  # (designs, GRID, GRID)
        self.f = np.einsum("dij,dj->di", kernel, w)
        self.t, self.x = t, y


@lru_cache(maxsize=4096)
def boundaries(t: tuple[float, ...], alpha: float, spending: str = "pocock") -> tuple[float, ...]:
    """Two-sided z boundaries ``c_k`` of looks at increasing information fractions ``t`` (Lan-DeMets).

    A look whose share of the error is zero gets ``NEVER``; ``t`` beyond 1
    counts as 1 (over-running: the last look spends what is left).
    """
    return tuple(float(c) for c in _boundaries(t, (alpha,), spending)[0])


def _boundaries(t: tuple[float, ...], alphas: tuple[float, ...], spending: str) -> np.ndarray:
    """Boundaries of the designs at levels ``alphas`` (one row each), all carried through the looks together."""
    out = np.empty((len(alphas), len(t)))
    walk, before = None, np.zeros(len(alphas))
    for k, tk in enumerate(t):
        share = np.array([spent(spending, a, tk) for a in alphas]) - before
        if walk is None:
            c = np.where(share > 0, np.minimum(NEVER, -special.ndtri(np.clip(share / 2, 1e-300, 0.5))), NEVER)
            walk = _Walk(tk, c * math.sqrt(tk))
        else:
            c = _solve(walk, tk, share)
            walk.advance(tk, c * math.sqrt(tk))
        before = before + share
        out[:, k] = c
    return out


def _solve(walk: _Walk, t: float, share: np.ndarray) -> np.ndarray:
    """Per design, the boundary whose first-crossing probability at fraction ``t`` equals its share.

    Newton's method on the crossing probability (it falls as the boundary
    rises), kept inside a bracket that bisection narrows when a step leaves it.
    """
    root = math.sqrt(t)
    lo, hi = np.full(len(share), 1e-6 * root), np.full(len(share), NEVER * root)
    b = np.clip(-special.ndtri(np.clip(share / 2, 1e-300, 0.5)) * root, lo, hi)
    for _ in range(40):
        value, slope = walk.crossing_slope(t, b)
        gap = value - share
        done = np.abs(gap) <= 1e-14 + 1e-10 * share
        if np.all(done):
            break
        lo, hi = np.where(gap > 0, b, lo), np.where(gap > 0, hi, b)
        step = b - gap / np.where(slope < 0, slope, -1.0)
        b = np.where(done, b, np.where((step >= lo) & (step <= hi), step, (lo + hi) / 2))
    return np.where(share > 1e-15, np.minimum(b / root, NEVER), NEVER)


def nominal(c: float) -> float:
    """The two-sided fixed-sample level a boundary ``c`` amounts to at its own look."""
    return 2 * float(special.ndtr(-c))


@lru_cache(maxsize=256)
def level_table(t: tuple[float, ...], spending: str = "pocock") -> np.ndarray:
    """Nominal levels of every look for every overall level in ``LEVELS``: shape (len(LEVELS), len(t))."""
    return 2 * special.ndtr(-_boundaries(t, LEVELS, spending))


def repeated_p(nominal_p: float, look: int, table: np.ndarray) -> float:
    """The smallest overall level at which look ``look`` (0-based) rejects a test with nominal p ``nominal_p``.

    Jennison & Turnbull's repeated p-value (2000, section 9.5): the level
    whose boundary the data at this look just reach, read off the table
    of nominal levels by interpolation on log scales.  Below the table's
    smallest level it returns that level; beyond its largest, 1.
    """
    levels = np.log(np.array(LEVELS))
    column = np.log(np.maximum(table[:, look], 1e-300))
    if nominal_p <= 0 or math.log(nominal_p) <= column[0]:
        return LEVELS[0]
    if math.log(nominal_p) > column[-1]:
        return 1.0
    return float(np.exp(np.interp(math.log(nominal_p), column, levels)))
