"""Statistics against independent computations: scipy, brute force, hand-worked examples, simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from perfab.analyse.checks import bimodal, drift, too_few_runs
from perfab.analyse.multiplicity import adjust
from perfab.analyse.compare import verdict
from perfab.analyse.methods import AssumeExact, AssumeNormal, AssumeNothing, Estimate, min_detectable_effect

ALPHA = 0.05


def _rejects(base_log: np.ndarray, exp_log: np.ndarray, shift: float) -> bool:
    """Does scipy's exact two-sided U test reject 'exp shifted by ``shift`` equals base' at ALPHA?"""
    return stats.mannwhitneyu(exp_log - shift, base_log, alternative="two-sided", method="exact").pvalue <= ALPHA


@pytest.mark.parametrize("n,m,seed", [(12, 15, 1), (20, 20, 2), (7, 9, 3), (30, 25, 4)])
def test_hodges_lehmann_interval_inverts_the_exact_u_test(n, m, seed):
    rng = np.random.default_rng(seed)
    base, exp = rng.lognormal(0.0, 0.05, n), rng.lognormal(0.02, 0.05, m)
    est = AssumeNothing().compare(base, exp, 0.95)
    a, b = np.log(base), np.log(exp)
    diffs = np.sort(np.subtract.outer(b, a).ravel())
    assert math.log1p(est.delta) == pytest.approx(float(np.median(diffs)), abs=1e-12)
    lo, hi = math.log1p(est.lo), math.log1p(est.hi)
    eps = float(np.min(np.diff(np.unique(diffs)))) / 4
    # The endpoints are where the test flips: accepted just inside, rejected just outside.
    assert not _rejects(a, b, lo + eps) and _rejects(a, b, lo - eps)
    assert not _rejects(a, b, hi - eps) and _rejects(a, b, hi + eps)
    inside = [d for d in diffs if lo + eps <= d <= hi - eps]
    assert all(not _rejects(a, b, d + eps / 2) for d in inside[:: max(1, len(inside) // 20)])


def test_hodges_lehmann_coverage_of_a_a_pairs():
    rng = np.random.default_rng(20240601)
    method = AssumeNothing()
    covered = 0
    for _ in range(400):
        base, exp = rng.lognormal(3.0, 0.2, 20), rng.lognormal(3.0, 0.2, 20)
        est = method.compare(base, exp, 0.95)
        covered += est.lo <= 0 <= est.hi
    assert 0.93 <= covered / 400 <= 0.975, covered


def test_nonparametric_p_values_agree_with_scipys_exact_test_without_ties():
    rng = np.random.default_rng(7)
    for shift in (0.0, 0.01, 0.05):
        base, exp = rng.lognormal(0, 0.03, 15), rng.lognormal(shift, 0.03, 18)
        est = AssumeNothing().compare(base, exp, 0.95)
        exact = stats.mannwhitneyu(exp, base, alternative="two-sided", method="exact").pvalue
        assert est.p == pytest.approx(exact, rel=1e-9)
        assert (est.lo > 0 or est.hi < 0) == (est.p <= ALPHA)  # interval and test agree


def test_nonparametric_handles_zeros_with_raw_differences():
    base, exp = np.array([0.0, 1, 2, 3, 4, 5]), np.array([2.0, 3, 4, 5, 6, 7])
    est = AssumeNothing().compare(base, exp, 0.95)
    assert est.delta == pytest.approx(2.0 / 2.5)  # HL shift 2 over the baseline median 2.5


def test_exact_identical_counts_are_flat():
    base, exp = np.full(3, 1_000_000.0), np.full(3, 1_000_000.0)
    est = AssumeExact().compare(base, exp, 0.95)
    assert (est.delta, est.lo, est.hi, est.p, est.warnings) == (0.0, 0.0, 0.0, None, ())
    assert verdict(est, 0.005, None, ALPHA) == "flat"


@pytest.mark.parametrize("exp_value,expected", [(1_010_000.0, "**"), (990_000.0, "**"), (1_004_000.0, "flat"),
                                                (996_000.0, "flat")])
def test_exact_differing_counts_judged_by_the_margin(exp_value, expected):
    est = AssumeExact().compare(np.full(2, 1_000_000.0), np.full(2, exp_value), 0.95)
    assert est.delta == pytest.approx(exp_value / 1e6 - 1)
    assert verdict(est, 0.005, None, ALPHA) == expected


def test_exact_warns_when_counts_vary():
    est = AssumeExact().compare(np.array([100.0, 101.0]), np.array([110.0, 110.0]), 0.95)
    assert est.warnings and "deterministic" in est.warnings[0]
    assert est.lo == pytest.approx(110 / 101 - 1) and est.hi == pytest.approx(0.1)


def test_normal_matches_scipy_welch():
    rng = np.random.default_rng(11)
    base, exp = rng.normal(100, 3, 12), rng.normal(104, 6, 17)
    est = AssumeNormal().compare(base, exp, 0.95)
    ref = stats.ttest_ind(exp, base, equal_var=False)
    assert est.p == pytest.approx(ref.pvalue, rel=1e-10)
    ci = ref.confidence_interval(0.95)
    mb = base.mean()
    assert est.lo == pytest.approx(ci.low / mb, rel=1e-9) and est.hi == pytest.approx(ci.high / mb, rel=1e-9)
    assert est.delta == pytest.approx(exp.mean() / mb - 1)


def test_bh_against_a_hand_worked_example():
    # sorted p: .005 .01 .03 .04 -> p*m/rank: .02 .02 .04 .04 -> step-up minima: .02 .02 .04 .04
    assert adjust([0.01, 0.04, 0.03, 0.005], "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_holm_against_a_hand_worked_example():
    # sorted p: .005 .01 .03 .04 -> p*(m-rank+1): .02 .03 .06 .04 -> running maxima: .02 .03 .06 .06
    assert adjust([0.01, 0.04, 0.03, 0.005], "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust([0.5, 0.9], "holm") == [1.0, 1.0]
    assert adjust([], "bh") == []


def _est(delta, lo, hi, method="nonparametric"):
    return Estimate(method, 1, 1, 1, 1, delta, lo, hi, 0.01)


@pytest.mark.parametrize("est,q,expected", [
    (_est(0.0, -0.001, 0.001), 0.5, "flat"),          # inside the margin, whatever q says
    (_est(0.02, 0.01, 0.03), 0.01, "**"),             # beyond the margin and significant
    (_est(-0.02, -0.03, -0.01), 0.01, "**"),          # same, downwards
    (_est(0.02, 0.01, 0.03), 0.2, "ns"),              # beyond the margin but not significant after FDR
    (_est(0.002, 0.001, 0.004), 0.001, "flat"),       # excludes zero, but inside the margin: no change
    (_est(0.01, 0.003, 0.02), 0.001, "ns"),           # straddles the margin
    (_est(0.03, -0.01, 0.07), 0.3, "ns"),             # straddles zero
    (_est(None, None, None), 0.001, "ns"),            # undefined
    (_est(0.0, -math.inf, math.inf), None, "ns"),     # too few runs for an interval
])
def test_verdict_cases(est, q, expected):
    assert verdict(est, 0.005, q, ALPHA) == expected


def test_too_few_runs_names_the_needed_n():
    message = too_few_runs(3, 3, 0.05)
    assert "3+3 runs" in message and "run >= 4 per side" in message and "0.1" in message
    assert too_few_runs(4, 4, 0.05) is None
    assert "run >= 5 per side" in too_few_runs(4, 4, 0.01)
    assert too_few_runs(0, 5, 0.05) == "no usable runs on one side"


def test_drift_on_a_monotone_trend_only():
    rng = np.random.default_rng(5)
    order = np.arange(20, dtype=float)
    trend = 1.0 + 0.01 * order + rng.normal(0, 0.002, 20)
    message = drift(trend, order, "inline")
    assert message and "drift across run order on inline" in message and "rho +" in message
    assert drift(rng.normal(1.0, 0.01, 20), order, "inline") is None


def test_bimodality_on_two_clusters_not_on_normal():
    rng = np.random.default_rng(9)
    two = np.concatenate([rng.normal(1.0, 0.01, 12), rng.normal(1.5, 0.01, 12)])
    message = bimodal(two, "outline")
    assert message and "outline samples form two clusters" in message
    assert bimodal(rng.normal(1.0, 0.01, 40), "outline") is None


def test_min_detectable_effect_grows_as_n_falls():
    mdes = [min_detectable_effect(n, n, 0.02, 0.05) for n in (40, 20, 10, 5, 3)]
    assert all(x < y for x, y in zip(mdes, mdes[1:]))
    # normal theory with t quantiles (38 df): (2.024394 + 0.851183) * cv * sqrt(2/n) * sqrt(pi/3)
    assert mdes[1] == pytest.approx((2.024394 + 0.851183) * 0.02 * math.sqrt(2 / 20) * math.sqrt(math.pi / 3),
                                    rel=1e-5)
    assert min_detectable_effect(20, 20, 0.02, 0.05, margin=0.001) == pytest.approx(mdes[1] + 0.001)
    assert min_detectable_effect(1, 10, 0.02, 0.05) is None
