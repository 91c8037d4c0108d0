"""Regression tests named after the statistics bugs they pin."""

from __future__ import annotations

import numpy as np

from perfab.analyse.compare import verdict
from perfab.analyse.methods import AssumeNothing


def test_all_zero_samples_on_both_sides_are_flat_not_inconclusive():
    """Zero context switches on both sides gave delta None and the verdict ``ns`` (inconclusive)."""
    zeros = np.zeros(12)
    est = AssumeNothing().compare(zeros, zeros, 0.95)
    assert (est.delta, est.lo, est.hi, est.p) == (0.0, 0.0, 0.0, 1.0)
    assert verdict(est, 0.005, 1.0, 0.05) == "flat"


def test_zero_baseline_median_with_a_change_stays_undefined():
    est = AssumeNothing().compare(np.zeros(12), np.arange(12.0), 0.95)
    assert est.delta is None and verdict(est, 0.005, 0.001, 0.05) == "ns"


def test_bimodality_screen_is_quiet_on_single_normal_samples():
    """With D > 3 the best split of one normal sample of 12 read as 'two clusters' about half the time."""
    from perfab.analyse.checks import bimodal

    rng = np.random.default_rng(2024)
    for n in (10, 12, 20, 40):
        fired = sum(bimodal(rng.normal(1.0, 0.005, n), "a") is not None for _ in range(300))
        assert fired / 300 <= (0.01 if n >= 20 else 0.0), (n, fired)  # below 20 values it never fires


def test_bimodality_screen_still_sees_well_separated_clusters():
    from perfab.analyse.checks import bimodal

    rng = np.random.default_rng(7)
    for n in (20, 40):
        fired = sum(bimodal(np.concatenate([rng.normal(0, 1, n // 2), rng.normal(8, 1, n - n // 2)]), "a")
                    is not None for _ in range(200))
        assert fired / 200 >= 0.95, (n, fired)
