"""Absolute values per side: the median of one cell's runs with a distribution-free interval.

A sweep is read point by point (a scaling curve): besides the comparison
of the sides at each point, each side's own median with its interval.
The interval for the median is the pair of order statistics
``[x_(k), x_(n+1-k)]`` whose coverage, from the binomial(n, 1/2)
distribution of the number of values below the median, is at least the
confidence asked for (Hollander, Wolfe & Chicken, *Nonparametric
Statistical Methods*, 3rd ed., 2014, section 3.6).  Assumption: the runs
of a cell are independent draws from one distribution.  With fewer than 6
runs no such interval exists at 95% and the ends are infinite.

Per-thread values: when the sweep varies a thread count (a parameter
named ``threads``, ``nr_task``, ``tasks`` or ``procs``) and the metric is
a rate, the median divided by the count, as will-it-scale prints
``per_thread_ops``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

THREAD_PARAMS = ("threads", "nr_task", "tasks", "procs", "nr_threads")


@dataclass(frozen=True)
class Summary:
    """One side's values at one point: median and interval."""

    workload: str  # workload name
    params: tuple[tuple[str, str], ...]  # the sweep point
    variant: str  # side name
    metric: str  # metric name
    n: int  # runs used
    median: float  # median of the runs
    lo: float  # lower end of the median's interval (-inf when too few runs)
    hi: float  # upper end
    per_thread: float | None  # median / thread count for rates in a thread sweep, else None
    threads: int | None = None  # the thread count per_thread divides by; None when per_thread is None


def median_interval(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(median, lo, hi): the order-statistic interval of the median (see the module docstring)."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    median = float(np.median(x))
    k = _median_rank(n, confidence)
    if k < 1:
        return median, -math.inf, math.inf
    return median, float(x[k - 1]), float(x[n - k])


@lru_cache(maxsize=4096)
def _median_rank(n: int, confidence: float) -> int:
    """The interval's lower rank k for n values (a history asks it for thousands of sessions of equal n)."""
    tail = (1 - confidence) / 2
    k = int(stats.binom.ppf(tail, n, 0.5))  # P(B <= k-1) <= tail < P(B <= k)
    while k > 0 and stats.binom.cdf(k - 1, n, 0.5) > tail:
        k -= 1
    return k


def thread_count(params: tuple[tuple[str, str], ...]) -> int | None:
    """The value of the point's thread-count parameter (``THREAD_PARAMS``), when it is a positive integer."""
    for name, value in params:
        if name in THREAD_PARAMS:
            try:
                count = int(float(value))
            except ValueError:
                return None
            return count if count > 0 else None
    return None


def is_rate(metric: str, unit: str | None) -> bool:
    """A rate, whose per-thread value is worth showing: per second, or operations (will-it-scale's ``ops``)."""
    text = f"{metric} {unit or ''}".lower()
    return text.rstrip().endswith("/s") or "/s " in text or "ops" in metric.lower() or "per_s" in metric.lower()


def summarize(workload: str, params, variant: str, metric: str, unit: str | None, values: np.ndarray,
              confidence: float) -> Summary | None:
    if len(values) == 0 or not np.all(np.isfinite(values)):
        return None
    median, lo, hi = median_interval(values, confidence)
    threads = thread_count(params)
    threads = threads if threads and is_rate(metric, unit) else None
    per_thread = median / threads if threads else None
    return Summary(workload, params, variant, metric, len(values), median, lo, hi, per_thread, threads)
