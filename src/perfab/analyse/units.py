"""Rows judged at the level that varies: one value per unit of replication, and the variance of each level.

When a session's runs go on from a few boots (``perfab.replication``), the
runs of one boot share its draw of memory layout, timer phase and vCPU
interleaving; they are not independent of each other, and a test that
counts them as replicates is pseudo-replicated (Hurlbert, Ecol. Monogr.
54 (1984) 187-211).  The analysis therefore summarises each unit by the
mean of its runs and compares the unit means: the test and the interval of
the row's method are those of the units, and so is every check of noise,
drift and correlation.  With an equal number of runs per unit this is the
nested design's test of the treatment against the between-unit mean square
(the units as the experimental units); unequal numbers weigh the units
equally.  Reference: Kalibera & Jones, "Rigorous Benchmarking in Reasonable
Time", ISMM 2013, sec. 3 (repetition at several levels; the interval at the
highest level that varies).

Variance components, after Kalibera & Jones (their S and T estimators, a
method-of-moments estimate of a balanced one-way random-effects model;
Searle, Casella & McCulloch, *Variance Components*, 1992, ch. 3), from the
runs of both sides:

- within a unit: ``W = S_2^2``, the pooled variance of runs about their unit's
  mean (divisor N - U);
- between units: ``B = max(0, S_1^2 - W / r)``, where ``S_1^2`` is the variance
  of the unit means about their side's mean and ``r`` the harmonic mean of
  runs per unit (the part of the unit means' spread their runs do not
  explain).

Each is reported as a standard deviation relative to the baseline's mean.
The runs per unit that make the units' means most precise for a fixed
cost, when a unit costs ``c_1`` beyond its runs and a run ``c_2``, are
``ceil(sqrt(c_1 W / (c_2 B)))`` (Kalibera & Jones, eq. 6): with the
between-unit part dominating, add units; with the within part dominating
and units dear, add runs per unit.  Assumptions: the units of a side are
independent draws of one distribution (their perturbations are seeded
apart), runs within a unit are exchangeable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

UNIT_STRIDE = 1 << 20  # a unit's label: session * UNIT_STRIDE + its index within the session


@dataclass(frozen=True)
class Levels:
    """A row's runs seen as units of replication: the unit means it was judged on, and its variance components."""

    unit: str  # what a unit is: "boot"
    base_units: int  # units of the baseline
    exp_units: int  # units of the experiment side
    runs_per_unit: float  # mean runs per unit, both sides
    between: float | None  # between-unit standard deviation over the baseline's mean (a fraction); None: unknown
    within: float | None  # within-unit standard deviation over the baseline's mean (a fraction); None: unknown

    def to_json(self) -> dict:
        return {"unit": self.unit, "units_base": self.base_units, "units_exp": self.exp_units,
                "runs_per_unit": self.runs_per_unit, "between": self.between, "within": self.within}

    def add_to(self) -> str:
        """Which level to add to for a narrower interval: ``unit`` (more units) or ``runs`` (more runs per unit)."""
        if self.between is None or self.within is None:
            return self.unit
        if self.within ** 2 / max(self.runs_per_unit, 1.0) > self.between ** 2:
            return "runs"
        return self.unit


def grouped(units: np.ndarray) -> bool:
    """Some unit holds more than one run (labels of runs that are their own unit are all distinct)."""
    return len(units) > 0 and len(np.unique(units)) < len(units)


def unit_means(values: np.ndarray, units: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray]:
    """(the mean of each unit's runs, the run order of each unit's first run, the runs of each unit), the units in
    the order their first runs ran."""
    labels, inverse, counts = np.unique(units, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=values, minlength=len(labels))
    first = np.full(len(labels), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, np.asarray(order, dtype=np.int64))
    by_time = np.argsort(first, kind="stable")
    return (sums / counts)[by_time], first[by_time], counts[by_time]


def components(sides: list[tuple[np.ndarray, np.ndarray]], scale: float) -> tuple[float | None, float | None]:
    """(between-unit, within-unit) standard deviations over ``scale``, pooled over ``sides`` (values, units)."""
    ss_within, df_within, means_ss, df_means, counts = 0.0, 0, 0.0, 0, []
    for values, units in sides:
        labels, inverse, n = np.unique(units, return_inverse=True, return_counts=True)
        means = np.bincount(inverse, weights=values, minlength=len(labels)) / n
        ss_within += float(np.sum((values - means[inverse]) ** 2))
        df_within += len(values) - len(labels)
        if len(labels) > 1:
            means_ss += float(np.sum((means - means.mean()) ** 2))
            df_means += len(labels) - 1
        counts += n.tolist()
    if not scale or not math.isfinite(scale):
        return None, None
    within = ss_within / df_within if df_within > 0 else None
    if df_means == 0:
        return None, None if within is None else math.sqrt(within) / abs(scale)
    r = len(counts) / sum(1.0 / c for c in counts)  # harmonic mean of runs per unit
    between = max(0.0, means_ss / df_means - (within or 0.0) / r)
    return math.sqrt(between) / abs(scale), None if within is None else math.sqrt(within) / abs(scale)


def optimal_runs(levels: Levels, unit_cost: float, run_cost: float) -> int | None:
    """Runs per unit that give the narrowest interval for a given cost (Kalibera & Jones, eq. 6), or None when a
    component or a cost is unknown."""
    if levels.between is None or levels.within is None or run_cost <= 0 or unit_cost <= 0:
        return None
    if levels.between == 0:
        return None  # every unit alike: more units cost more and change nothing; more runs only narrow within
    return max(1, math.ceil(math.sqrt(unit_cost * levels.within ** 2 / (run_cost * levels.between ** 2))))
