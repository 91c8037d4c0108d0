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
