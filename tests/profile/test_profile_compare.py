"""compare_profiles, welch_p and benjamini_hochberg on constructed runs with known answers."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from perfab.errors import UsageError
from perfab.profile import benjamini_hochberg, compare_profiles, welch_p

BASE = [
    {"self.e:u.x": 10.0, "self.e:u.y": 89.8, "self.e:k.tiny": 0.2},
    {"self.e:u.x": 20.0, "self.e:u.y": 79.9, "self.e:k.tiny": 0.1},
    {"self.e:u.x": 30.0, "self.e:u.y": 70.0},
]
EXP = [
    {"self.e:u.y": 60.0, "self.e:u.z": 40.0},
    {"self.e:u.y": 62.0, "self.e:u.z": 37.7, "self.e:k.tiny": 0.3},
    {"self.e:u.y": 64.0, "self.e:u.z": 36.0},
]


def by_symbol(rows):
    return {r.symbol: r for r in rows}


def test_means_spreads_and_deltas_with_missing_symbols_as_zero():
    rows = by_symbol(compare_profiles(BASE, EXP))
    x, z = rows["self.e:u.x"], rows["self.e:u.z"]
    assert (x.base_mean, x.exp_mean, x.delta_pp) == pytest.approx((20.0, 0.0, -20.0))
    assert x.base_rsd_pct == pytest.approx(100 * math.sqrt(200 / 3) / 20)  # population sd, as lkp
    assert x.exp_rsd_pct == 0.0
    assert (z.base_mean, z.exp_mean) == pytest.approx((0.0, 37.9))
    assert (x.n_base, x.n_exp, z.n_base, z.n_exp) == (3, 3, 3, 3)


def test_rows_under_min_share_on_both_sides_are_dropped_and_counted():
    rows = compare_profiles(BASE, EXP, min_share=0.5)
    assert "self.e:k.tiny" not in by_symbol(rows)
    assert rows.dropped == 1 and rows.min_share == 0.5
    everything = compare_profiles(BASE, EXP, min_share=0.0)
    assert everything.dropped == 0
    assert by_symbol(everything)["self.e:k.tiny"].exp_mean == pytest.approx(0.1)


def test_rows_are_sorted_by_absolute_change():
    rows = compare_profiles(BASE, EXP)
    assert [r.symbol for r in rows] == ["self.e:u.z", "self.e:u.x", "self.e:u.y"]
    assert [abs(r.delta_pp) for r in rows] == sorted((abs(r.delta_pp) for r in rows), reverse=True)


def test_large_consistent_shift_is_significant_and_noise_is_not():
    base = [{"a": 50.0 + d, "b": 50.0 - d} for d in (-1.0, 0.0, 1.0)]
    exp = [{"a": 20.0 + d, "b": 80.0 - d - n, "c": n} for d, n in ((1.0, 0.5), (-1.0, 0.0), (0.0, 0.9))]
    rows = by_symbol(compare_profiles(base, exp, min_share=0.0))
    assert rows["a"].significant and rows["b"].significant
    assert not rows["c"].significant  # 0.5 +- 0.45 against nothing: three runs cannot tell
    assert rows["a"].p_value < 0.001


def test_welch_p_matches_scipy_on_ordinary_samples():
    a, b = [24.1, 25.3, 24.9, 24.8], [32.2, 33.9, 32.5]
    expected = stats.ttest_ind(a, b, equal_var=False).pvalue
    assert welch_p(a, b) == pytest.approx(expected, rel=1e-12)


def test_welch_p_degenerate_cases():
    assert welch_p([5.0, 5.0, 5.0], [0.0, 0.0, 0.0]) == 0.0
    assert welch_p([0.0, 0.0], [0.0, 0.0, 0.0]) == 1.0
    assert welch_p([1.0], [2.0, 3.0]) == 1.0
    # one side constant: the other side's n - 1 degrees of freedom
    one_sided = 2 * stats.t.sf(abs((2.0 - 0.0) / math.sqrt(1.0 / 3)), 2)
    assert welch_p([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]) == pytest.approx(one_sided)


def test_benjamini_hochberg_step_up():
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005], 0.05) == [True, True, True, True]
    assert benjamini_hochberg([0.01, 0.02, 0.03, 0.5], 0.05) == [True, True, True, False]
    assert benjamini_hochberg([0.04, 0.04, 0.5], 0.05) == [False, False, False]
    assert benjamini_hochberg([], 0.05) == []


def test_fdr_off_judges_each_row_alone():
    base = [{"a": v, "b": 100 - v} for v in (10.0, 10.6, 11.2)]
    exp = [{"a": v, "b": 100 - v} for v in (11.0, 11.4, 12.3)]
    alone = by_symbol(compare_profiles(base, exp, fdr=False, alpha=0.2))
    assert alone["a"].p_value < 0.2 and alone["a"].significant
    assert compare_profiles(base, exp, fdr=False).method == "Welch t-test"


def test_one_run_per_side_warns_and_marks_nothing():
    rows = compare_profiles(BASE[:1], EXP[:1])
    assert not any(r.significant for r in rows)
    assert rows.warnings and "need >= 2 profiled runs per side" in rows.warnings[0]
    assert all(r.base_rsd_pct == 0.0 for r in rows)


@pytest.mark.parametrize(
    ("base", "exp", "kwargs", "message"),
    [
        ([], EXP, {}, "no baseline profiles"),
        (BASE, [{}], {}, "experiment profile 1 is empty"),
        (BASE, [{"a": -1.0}], {}, "share of 'a' is not a percentage"),
        (BASE, [{"a": math.nan}], {}, "share of 'a' is not a percentage"),
        (BASE, EXP, {"alpha": 0.95 * 20}, "alpha must lie between 0 and 1"),
        (BASE, EXP, {"min_share": -1}, "min_share must be a percentage"),
    ],
)
def test_bad_input_is_a_usage_error(base, exp, kwargs, message):
    with pytest.raises(UsageError, match=message):
        compare_profiles(base, exp, **kwargs)
