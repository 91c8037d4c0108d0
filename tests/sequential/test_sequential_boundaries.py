"""Error-spending boundaries against published tables, and the repeated p-value they define."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from perfab.analyse.spending import _Walk, boundaries, level_table, nominal, repeated_p, spent

FIVE = (0.2, 0.4, 0.6, 0.8, 1.0)


def crossing_probabilities(c: tuple[float, ...], t: tuple[float, ...]) -> tuple[float, ...]:
    """P(first |Z_k| >= c_k at look k) under no difference, for given boundaries ``c`` at fractions ``t``."""
    out, walk = [], None
    for ck, tk in zip(c, t):
        b = np.array([ck * math.sqrt(tk)])
        if walk is None:
            out.append(nominal(ck))
            walk = _Walk(tk, b)
        else:
            out.append(float(walk.crossing(tk, b)[0]))
            walk.advance(tk, b)
    return tuple(out)


def test_pocock_type_spending_five_equal_looks_matches_the_published_boundaries():
    # Lan-DeMets Pocock-type spending, two-sided alpha 0.05, 5 equally spaced looks
    # (the values printed by ld98 / ldbounds and gsDesign's sfLDPocock).
    assert boundaries(FIVE, 0.05, "pocock") == pytest.approx((2.438, 2.427, 2.410, 2.397, 2.386), abs=6e-4)


def test_obrien_fleming_type_spending_five_equal_looks_matches_the_published_boundaries():
    # Lan-DeMets O'Brien-Fleming-type spending at alpha/2 per side (two-sided 0.05), 5 equally spaced looks.
    assert boundaries(FIVE, 0.05, "obrien-fleming") == pytest.approx((4.877, 3.357, 2.680, 2.290, 2.031),
                                                                       abs=6e-4)


@pytest.mark.parametrize("t,pocock,obf", [
    ((0.25, 0.5, 0.75, 1.0), (2.368, 2.368, 2.358, 2.350), (4.333, 2.963, 2.359, 2.014)),
    ((0.3, 0.6, 0.9, 1.0), (2.312, 2.321, 2.318, 2.412), (3.929, 2.670, 2.121, 2.063)),
    ((0.2, 0.4, 0.9, 1.0), (2.438, 2.427, 2.224, 2.376), (4.877, 3.357, 2.097, 2.054)),
])
def test_unequally_spaced_looks_match_the_tabulated_boundaries(t, pocock, obf):
    # The same two spending functions at the look times tabulated beside ldbounds' examples.
    assert boundaries(t, 0.05, "pocock") == pytest.approx(pocock, abs=6e-4)
    assert boundaries(t, 0.05, "obrien-fleming") == pytest.approx(obf, abs=6e-4)


def _constant(k: int, shape) -> float:
    """The constant c with P(cross c * shape(t) at some look) = 0.05, by the crossing recursion."""
    t = tuple((i + 1) / k for i in range(k))
    total = lambda c: sum(crossing_probabilities(tuple(c * shape(x) for x in t), t)) - 0.05  # noqa: E731
    return optimize.brentq(total, 1.0, 5.0, xtol=1e-9)


@pytest.mark.parametrize("k,c", [(2, 2.178), (3, 2.289), (4, 2.361), (5, 2.413), (10, 2.555)])
def test_crossing_recursion_reproduces_pocock_constants(k, c):
    # Pocock (1977); Jennison & Turnbull (2000) Table 2.1: C_P(K) for two-sided alpha 0.05.
    assert _constant(k, lambda t: 1.0) == pytest.approx(c, abs=6e-4)


@pytest.mark.parametrize("k,c", [(2, 1.977), (3, 2.004), (4, 2.024), (5, 2.040), (10, 2.087)])
def test_crossing_recursion_reproduces_obrien_fleming_constants(k, c):
    # O'Brien & Fleming (1979); Jennison & Turnbull (2000) Table 2.3: boundary C_B(K) * sqrt(K/k).
    assert _constant(k, lambda t: 1 / math.sqrt(t)) == pytest.approx(c, abs=6e-4)


@pytest.mark.parametrize("spending", ["pocock", "obrien-fleming", "linear"])
def test_each_look_spends_exactly_its_share(spending):
    t = tuple(np.arange(6, 41, 2) / 40)
    c = boundaries(t, 0.05, spending)
    cumulative = np.cumsum(crossing_probabilities(c, t))
    assert cumulative == pytest.approx([spent(spending, 0.05, x) for x in t], abs=2e-6)


def test_one_look_is_the_fixed_sample_test():
    assert boundaries((1.0,), 0.05) == pytest.approx((1.959964,), abs=1e-6)
    table = level_table((1.0,))
    assert repeated_p(0.01, 0, table) == pytest.approx(0.01, rel=1e-3)
    assert repeated_p(0.3, 0, table) == pytest.approx(0.3, rel=1e-3)


def test_repeated_p_is_the_level_whose_boundary_the_data_just_reach():
    t = tuple(np.arange(6, 31, 2) / 30)
    table = level_table(t)
    for look, p in ((0, 0.004), (5, 0.001), (12, 0.02)):
        level = repeated_p(p, look, table)
        assert nominal(boundaries(t, level)[look]) == pytest.approx(p, rel=2e-3)
        assert level > p  # a look among several costs: the overall level exceeds the nominal one
    assert repeated_p(0.9, 3, table) == 1.0


def test_over_running_the_plan_spends_the_rest_at_the_last_look():
    # Information beyond the planned maximum counts as 1: nothing is left for a further look.
    c = boundaries((0.5, 1.0, 1.0 + 1e-9), 0.05)
    assert c[-1] == 12.0


def test_a_looks_boundary_depends_only_on_the_looks_before_it():
    # What lets an experiment reuse the whole plan's boundaries at every look.
    t = tuple(np.arange(6, 41, 2) / 40)
    assert boundaries(t[:5], 0.05) == pytest.approx(boundaries(t, 0.05)[:5], abs=1e-9)
