"""Regression tests named after the statistics bugs they pin."""

from __future__ import annotations

import numpy as np

from perfab.analyse.compare import verdict
from perfab.analyse.methods import AssumeNothing


def test_all_zero_samples_on_both_sides_are_not_shown_flat():
    """Zero on both sides (sys time on a 4 ms clock) hides up to a clock tick on each side: no ratio exists,
    so nothing is shown within a relative margin; the change is +0 in the metric's unit, ``ns``."""
    zeros = np.zeros(12)
    est = AssumeNothing().compare(zeros, zeros, 0.95)
    assert est.delta is None and est.basis == "absolute"
    assert (est.shift, est.shift_lo, est.shift_hi, est.p) == (0.0, 0.0, 0.0, 1.0)
    assert verdict(est, 0.005, 1.0, 0.05) == "ns"


def test_zero_baseline_median_with_a_change_is_an_absolute_shift():
    """0 -> 2,140 once printed Delta '-' and ``ns``: now the shift in the metric's unit, ``**`` by the rank test."""
    rng = np.random.default_rng(4)
    base, exp = np.zeros(12), np.round(2140 + rng.normal(0, 30, 12))
    est = AssumeNothing().compare(base, exp, 0.95)
    assert est.delta is None and est.basis == "absolute"
    assert 2000 < est.shift_lo <= est.shift <= est.shift_hi < 2300
    assert verdict(est, 0.005, est.p, 0.05) == "**"
    same = AssumeNothing().compare(np.zeros(12), np.r_[np.zeros(11), 1.0], 0.95)
    assert verdict(same, 0.005, same.p, 0.05) == "ns"  # one run in twelve is not a change


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
