"""What every statistical method is: one object that compares two samples and answers for itself.

The model is benchstat's ``benchmath.Assumption`` (golang.org/x/perf): an
assumption about the samples (``AssumeNothing``, ``AssumeNormal``,
``AssumeExact``) that summarizes and compares them, and whose warnings say
where the samples do not fit it.  Here a method (``Method``) returns an
``Estimate``: centers, the relative delta with its confidence interval (at
``confidence``, e.g. 0.95), the same change as an absolute shift in the
metric's unit, and a two-sided p-value; and it gives a row's verdict, says
when the samples break its assumption, its minimum detectable effect, and
its line in the report.  Its declared traits (``perfab.methodtraits``) are
what other code asks.  ``alpha`` (the significance level, e.g. 0.05) is
not a method parameter of ``compare``: the analysis applies it after the
adjustment across rows.

What Delta is (``Estimate.basis``):

- ``ratio``: every value is positive: the change is a ratio of locations,
  ``delta = exp(shift of log values) - 1``;
- ``shift/median``: some values are zero (or negative) and the baseline's
  median is not: ``delta = shift / |baseline median|``;
- ``absolute``: the baseline's median is zero: no relative change exists;
  ``delta`` is None and the change is ``shift``, in the metric's unit.

This module imports numpy, scipy and the bottom of perfab only.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from scipy import stats

from perfab.methodtraits import Traits, declared
from perfab.units import fmt_pct

RATIO, SHIFT_MEDIAN, ABSOLUTE = "ratio", "shift/median", "absolute"


class Verdict(StrEnum):
    """A row's verdict; its value is the mark the reports print (a ``str``, so JSON and CSV carry it as is)."""

    CHANGE = "**"  # a change beyond per-run noise and the margin (adjusted p at most alpha)
    FLAT = "flat"  # shown to be no change: the interval lies inside +-margin
    NS = "ns"  # inconclusive at this n and noise
    VALID = "valid"  # a check metric: every run met the expected value
    INVALID = "INVALID"  # a check metric: some runs missed the expected value (``Row.invalid_runs``)
    NONE = "-"  # not compared: no usable samples on a side, or samples refused
    PENDING = ""  # estimated, before the adjustment across rows gives the verdict


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
    p: float | None  # two-sided p-value; None for a method without one (``Traits.tested``)
    warnings: tuple[str, ...] = ()  # what the method noticed about its own assumptions
    basis: str = RATIO  # what delta is: ratio | shift/median | absolute (see the module docstring)
    shift: float | None = None  # the change in the metric's unit (Hodges-Lehmann shift, or difference of medians)
    shift_lo: float | None = None  # its interval, in the metric's unit
    shift_hi: float | None = None
    resolution: float = 0.0  # relative step below which flat cannot be shown: the data's grid or the metric's clock
    coarse: bool = False  # the spread is under half a grid step: the interval was widened by the worst rounding
    step: float = 0.0  # the grid step the values were taken on, in the metric's unit (``grid.resolution``); 0: none
    unchecked: bool = False  # exact method with one run on a side: that the counts repeat was never shown

    @property
    def traits(self) -> Traits:
        """What the method that made it declares (``perfab.methodtraits``): ask these, not its name."""
        return declared(self.method)


@dataclass(frozen=True)
class Refusal:
    """Why a method will not judge a row: the samples break its assumption (``Method.refuses``)."""

    text: str  # the row's note: what was seen, what the method tolerates, which method judges instead
    data: dict[str, Any]  # what the note states, as numbers (the diagnostic's data)


class Method(ABC):
    """A statistical method: it compares a metric's samples, experiment side against baseline.

    A subclass sets ``name`` (its line in ``perfab.methodtraits.DECLARED``,
    which declares its traits), gives ``compare`` and ``describe``, and
    overrides ``refuses``, ``verdict`` and ``mde`` where a tested method's
    defaults do not fit.  Its docstring names the test, its assumptions, why
    it is used and a reference, so a reader can check every verdict.
    """

    name: str = ""  # as the spec, the report and the JSON name it

    @property
    def traits(self) -> Traits:
        """What the method declares about itself (``perfab.methodtraits.Traits``)."""
        return declared(self.name)

    @abstractmethod
    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        """The estimate; ``step`` is the values' grid (None: the one they show, ``grid.resolution``)."""

    @abstractmethod
    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it; ``sequential`` is the spec's ``runs = "auto"`` settings."""

    def refuses(self, base: np.ndarray, exp: np.ndarray) -> Refusal | None:
        """Why these samples break the method's assumption, so ``traits.fallback`` judges them; None: they fit."""
        return None

    def verdict(self, est: Estimate, margin: float, q: float | None, alpha: float) -> Verdict:
        """``**``, ``flat`` or ``ns`` of a tested method: the adjusted p-value ``q`` and the interval.

        ``**`` needs ``q`` at most alpha and the interval beyond the margin;
        ``flat`` needs the interval inside +-margin and the data's grid
        finer than the margin; with a baseline median of 0 the interval of
        the absolute shift must exclude 0, and nothing is ``flat``.
        """
        if est.basis == ABSOLUTE:
            lo, hi = est.shift_lo, est.shift_hi
            if lo is None or hi is None or q is None:
                return Verdict.NS
            return Verdict.CHANGE if q <= alpha and (lo > 0 or hi < 0) else Verdict.NS
        if est.delta is None or est.lo is None or est.hi is None or not math.isfinite(est.delta):
            return Verdict.NS
        if inside(est, margin) and est.resolution <= margin:
            return Verdict.FLAT
        if q is not None and q <= alpha and (est.lo > margin or est.hi < -margin):
            return Verdict.CHANGE
        return Verdict.NS

    def mde(self, n_base: int, n_exp: int, cv: float | None, alpha: float, margin: float) -> float | None:
        """Smallest relative shift called ``**`` with 80% power (``min_detectable_effect``); None: none applies."""
        return min_detectable_effect(n_base, n_exp, cv, alpha, margin=margin)


def inside(est: Estimate, margin: float) -> bool:
    """The delta's interval lies within +-margin."""
    return est.lo is not None and est.hi is not None and -margin <= est.lo and est.hi <= margin


def make_estimate(name, base, exp, delta, lo, hi, p, warnings, basis, shift, rel_step) -> Estimate:
    """An ``Estimate`` with the sides' medians and means; ``shift`` is (shift, lo, hi) in the metric's unit."""
    s, s_lo, s_hi = shift
    return Estimate(name, float(np.median(base)), float(np.median(exp)), float(np.mean(base)),
                    float(np.mean(exp)), delta, lo, hi, p, tuple(warnings), basis, s, s_lo, s_hi, rel_step)


def level(confidence: float) -> str:
    """A confidence level as the report prints it (``95%``, ``99.5%``)."""
    return fmt_pct(confidence, digits=3)


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
