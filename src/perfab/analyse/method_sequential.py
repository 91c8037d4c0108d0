"""The group-sequential method, ``sequential``: repeated rank-test intervals valid under monitoring.

Its computation is ``perfab.analyse.sequential``, which the runner asks after every block, and which names
its estimates.
"""

from __future__ import annotations

import numpy as np

from perfab.analyse.methodbase import Estimate, Method, level
from perfab.analyse.sequential import NAME, sequential_estimate


class AssumeSequential(Method):
    """Group-sequential rank test: intervals that stay valid when the runner looks after every block.

    Test: at look k (after ``min_runs``, ``min_runs + 2``, ... runs per
    side) the Hodges-Lehmann interval and rank-sum test of ``nonparametric``
    are taken at the nominal level of a two-sided Lan-DeMets error-spending
    boundary (Pocock type by default) at information fraction
    ``n_k / max_runs``: the repeated confidence intervals of Jennison &
    Turnbull.  Together the intervals of all looks cover the true change
    with probability ``confidence``, whatever rule stops the experiment;
    ``p`` is the repeated p-value, valid at any stopping look.  The
    verdicts and the adjustment across rows (Holm, valid under the
    dependence a common stopping time creates) are made by
    ``perfab.analyse.sequential.decide``, which the runner calls after every
    block; see that module.

    Assumptions: those of ``nonparametric`` (independent runs, a pure shift
    on the log scale), and that the rank statistics of successive looks
    have the joint distribution of a Brownian motion (asymptotically true
    of the rank-sum statistic; the error under monitoring is checked by
    simulation in ``bench/sequential_runs.py``).  The design (``min_runs``,
    ``max_runs``) must be fixed before the first look; without one, the
    samples at hand are taken as the whole plan.

    References: Lan & DeMets, "Discrete sequential boundaries for clinical
    trials", Biometrika 70 (1983) 659-663; Jennison & Turnbull, *Group
    Sequential Methods with Applications to Clinical Trials*, 2000, ch. 9
    (repeated confidence intervals and p-values) and ch. 19 (computing the
    boundaries); Holm, Scand. J. Statist. 6 (1979) 65-70.
    """

    name = NAME

    def __init__(self, design=None):
        self.design = design  # perfab.analyse.sequential.Design; None: the samples at hand are the whole plan

    def describe(self, confidence: float, sequential=None) -> str:
        """The method as a report's legend names it; ``sequential`` is the spec's ``runs = "auto"`` settings."""
        if sequential is None:
            return self.name
        return (f"group-sequential rank test, {sequential.spending} error spending over looks after every block "
                f"({sequential.min_runs}..{sequential.max_runs} runs per side); Delta = Hodges-Lehmann ratio, "
                f"{level(confidence)} repeated intervals valid under monitoring")

    def compare(self, base: np.ndarray, exp: np.ndarray, confidence: float, step: float | None = None) -> Estimate:
        return sequential_estimate(base, exp, confidence, self.design, step=step or 0.0)

