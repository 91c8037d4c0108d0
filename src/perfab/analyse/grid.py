"""The grid a metric's values sit on: a clock's tick, whole counts, printed digits, seen in the values or declared.

A reading taken on a grid of step q (a 4 ms scheduler tick, whole events,
a figure printed to three decimals) hides any change smaller than about q
and piles the pairwise differences of two samples on multiples of q, so
the Hodges-Lehmann interval can collapse onto 0 for a real change.  The
rank method (``methods.AssumeNothing``) widens its interval for rounding
once it knows q, and no row can be ``flat`` with a margin finer than q.

``resolution`` tells q, the larger of the sides' steps:

- each side's step seen in its own values (``side_step``); gaps between the
  sides are the effect, not the grid, and are never used;
- for a side whose runs all read one value, which says nothing of its grid:
  the margin's resolution, ``margin * |value| / 2`` (rounding to it moves a
  difference by at most the margin, so two equal sides are ``flat`` and a
  change of 1.5 margins is seen), never the digits it happens to be printed
  with: the verdict of 1.0 against 1.02 is that of 1000 against 1020.

A metric may declare its clock (``perfab.metrics.Metric.step``: rusage user
and sys times carry the kernel's tick).  ``flat_resolution`` adds it: no
row is ``flat`` with a margin finer than the clock, whatever the values
look like.  The interval is widened for rounding only by the step the
values show: rusage CPU times are tick counts rescaled to the task's
precise runtime, so a task that took no system tick reads its runtime to
the nanosecond (continuous values), and one whose ticks split between
user and system time reads them on a grid the values show.

A side's step (``side_step``) is the greatest common step of its values
within a tolerance, never the smallest gap alone: rescaled clock ticks
read 0.003966, 0.003936, 0.003982 s, whose smallest gap (1.6e-5 s) says
nothing of the 4 ms tick.  The values are split into clusters at their
largest gaps (up to ``SPLITS`` of them, and at every gap between distinct
values), and a split is a grid when

1. some cluster holds at least two values (a grid repeats values; data
   without repeats or near-repeats is taken as continuous);
2. the cluster centres are whole multiples of one step q (within
   ``JITTER_TOL`` of a step; ``approx_gcd``);
3. every value lies within ``JITTER_TOL * q`` of the grid fitted to it
   (least squares of value on grid index), or within ``LONE_TOL * q``
   when only one cluster repeats (a lone reading a tick away from a tight
   cluster is a grid, a lone outlier from a spread cluster is not).

Values exactly on a grid (whole counts, printed digits) are the limit of
no jitter: their step is the greatest common divisor of their differences
(Euclid's algorithm to the values' float precision).  The largest step
that passes is the side's step.  A false grid on continuous data costs
power (a wider interval, no ``flat``); a missed grid gives a confident
wrong ``flat``; the tolerances are set on the noise models of
``bench/verdict_rules.py``, where independent continuous samples of 6 to 40
runs show a grid in under 1% of sides.

Assumptions: a side's values are one grid's points plus a jitter well
under a quarter step (the kernel's rescaling moves a tick count by well
under 1%), and a side shows at least one repeated grid point; a grid no
value repeats on is taken as continuous data (the error that costs
power, not the one that gives a wrong ``flat``).  Reference: grouped
(rounded) data and what rounding hides, Heitjan, "Inference from grouped
continuous data: a review", Statistical Science 4 (1989) 164-183; the
tick rescaling, Linux kernel/sched/cputime.c (``cputime_adjust``).
"""

from __future__ import annotations

import math

import numpy as np

JITTER_TOL = 0.25  # values within a quarter step of the grid: the middle half between grid points is empty
LONE_TOL = 0.06  # the same when only one cluster holds repeated values: a far tighter fit is asked
SPLITS = 12  # largest gaps tried as cluster boundaries
MULTIPLES = 4  # a jittered grid's occupied points are at most this many steps apart
FLOAT_EPS = 1e-9  # relative precision below which two values are the same reading
CHANCE = 0.01  # at most this chance that continuous values fit some tried grid within the tolerance


def resolution(*sides: np.ndarray, declared: float = 0.0, margin: float = 0.0) -> float:
    """The grid step the values show (0 for continuous data), in their unit: see the module docstring.

    ``declared`` (the metric's clock) stands for the step of a side whose runs all read one value."""
    steps = [0.0]
    for x in sides:
        x = np.asarray(x, dtype=float)
        step = side_step(x)
        if step is None:  # one value read by every run: the declared step, or the margin's resolution
            step = declared or margin * abs(float(x[0])) / 2
        steps.append(step)
    return max(steps)


def flat_resolution(relative: float, declared: float, median_base: float) -> float:
    """The relative step below which ``flat`` cannot be shown: the values' (``relative``) or the declared clock's."""
    if not declared:
        return relative
    return max(relative, declared / abs(median_base) if median_base else math.inf)


def side_step(x: np.ndarray) -> float | None:
    """The grid step of one side's values; 0 when continuous; None when every run read the same value."""
    x = np.sort(np.asarray(x, dtype=float))
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return 0.0
    if x[0] == x[-1]:
        return None
    eps = FLOAT_EPS * max(abs(x[0]), abs(x[-1]))
    gaps = np.diff(x)
    best = _exact_step(x, gaps, eps)
    order = np.argsort(gaps)[::-1]
    for j in range(1, min(SPLITS, len(gaps)) + 1):
        if gaps[order[j - 1]] <= eps:
            break
        best = max(best, _jittered_step(x, np.sort(order[:j])))
    return best


def exact_step(values: np.ndarray) -> float:
    """The step of values exactly on a grid (whole counts, printed digits; some repeat), else 0.

    No jittered grid: two tight clusters are a grid to ``side_step`` but two
    clusters to the bimodality screen (``checks.bimodal``), which asks this.
    """
    x = np.sort(np.asarray(values, dtype=float))
    x = x[np.isfinite(x)]
    if len(x) < 2 or x[0] == x[-1]:
        return 0.0
    return _exact_step(x, np.diff(x), FLOAT_EPS * max(abs(x[0]), abs(x[-1])))


def _exact_step(x: np.ndarray, gaps: np.ndarray, eps: float) -> float:
    """Values exactly on a grid (some repeat): the greatest common divisor of their differences."""
    if not np.any(gaps <= eps):
        return 0.0
    distinct = x[np.concatenate([[True], gaps > eps])]
    step = _euclid(np.diff(distinct), eps)
    return step if step > 2 * eps else 0.0


def _euclid(diffs: np.ndarray, eps: float) -> float:
    """The greatest common divisor of positive reals, to ``eps`` (remainders within eps of 0 or of the divisor)."""
    g = 0.0
    for d in np.unique(diffs):
        a, b = float(d), g
        while b > eps:
            a, b = b, math.fmod(a, b)
            if b > a - eps:
                b = 0.0
        g = a
        if g <= 2 * eps:
            break
    return g


def _jittered_step(x: np.ndarray, cut: np.ndarray) -> float:
    """The step of a grid whose clusters are ``x`` split after the positions ``cut``; 0 when it is no grid."""
    bounds = np.concatenate([[0], cut + 1, [len(x)]])
    sizes = np.diff(bounds)
    repeated = int(np.sum(sizes >= 2))
    if repeated == 0:
        return 0.0
    centres = np.add.reduceat(x, bounds[:-1]) / sizes
    step = approx_gcd(np.diff(centres), JITTER_TOL)
    if step == 0.0:
        return 0.0
    index = np.repeat(np.rint((centres - centres[0]) / step), sizes)
    slope, offset = np.polyfit(index, x, 1)
    if slope <= 0:
        return 0.0
    worst = float(np.max(np.abs(x - (offset + slope * index)))) / slope
    return float(slope) if worst <= tolerance(len(x), repeated) else 0.0


def tolerance(n: int, repeated: int) -> float:
    """How far from the grid (in steps) a value may lie, for ``n`` values of which ``repeated`` clusters repeat.

    Two values fix a grid (its offset and step); each of the other n - 2
    continuous values falls within t steps of it by chance with probability
    about 2t, so t is held to ``(2t)^(n - 2)`` times the grids tried at most
    ``CHANCE``: 0.06 at 6 values, 0.21 at 12, ``JITTER_TOL`` from 14 on.
    """
    tried = SPLITS * MULTIPLES
    chance = 0.5 * (CHANCE / tried) ** (1 / max(1, n - 2))
    return min(JITTER_TOL if repeated >= 2 else LONE_TOL, chance)


def approx_gcd(deltas: np.ndarray, tol: float) -> float:
    """The largest q (the smallest delta over 1..MULTIPLES) of which every delta is a whole multiple within tol*q."""
    if len(deltas) == 0 or np.min(deltas) <= 0:
        return 0.0
    smallest = float(np.min(deltas))
    for m in range(1, MULTIPLES + 1):
        q = smallest / m
        ratio = deltas / q
        if np.all(np.abs(ratio - np.rint(ratio)) <= tol):
            return q
    return 0.0


def cells(values: np.ndarray, step: float) -> int:
    """How many grid points of ``step`` the values occupy (clusters split at gaps over half a step)."""
    x = np.sort(np.asarray(values, dtype=float))
    if len(x) == 0:
        return 0
    if step <= 0:
        return len(np.unique(x))
    return 1 + int(np.sum(np.diff(x) > step / 2))


def under_one_step(values: np.ndarray, step: float) -> bool:
    """Does one side show too few grid values for its rounding errors to be taken as dithered noise?

    Rounding errors behave like independent uniform noise (Sheppard's
    condition) once the spread covers a step or so.  A side is taken to be
    below that when its values occupy fewer than three grid points: values
    that sit on one point, or straddle a single boundary, can hide any shift
    up to a step (a stable time just under a tick boundary, half its runs
    reading a tick more).  Three or more points mean the spread crosses two
    boundaries.  Counts of grid points are robust to an outlier, unlike a
    standard deviation.  Simulation shows the smoothed interval keeps its
    coverage from sigma = q/8 up (0.98 at sigma = q/2; ``bench/verdict_rules.py``).
    """
    if len(values) < 2:
        return True
    return cells(values, step) < 3
