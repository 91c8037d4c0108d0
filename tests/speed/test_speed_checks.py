"""The two-cluster check scores every split at once; the result is the scan's over every split."""

from __future__ import annotations

import numpy as np
import pytest

from perfab.analyse import checks


def _scan(x: np.ndarray, lo: int) -> int:
    """The former loop: each split's within-cluster sum of squares computed from its two halves."""
    best = None
    for k in range(lo, len(x) - lo + 1):
        sse = x[:k].var() * k + x[k:].var() * (len(x) - k)
        if best is None or sse < best[0]:
            best = (sse, k)
    return best[1]


def _sample(rng, kind: str, n: int) -> np.ndarray:
    if kind == "normal":
        return rng.normal(0, 1, n)
    if kind == "two":
        return np.concatenate([rng.normal(0, 1, n // 2), rng.normal(8, 1, n - n // 2)])
    if kind == "grid":
        return np.round(np.concatenate([rng.normal(10, 1, n // 3), rng.normal(30, 1, n - n // 3)]))
    return rng.lognormal(0, 1, n) + 1e6  # far from 0: the prefix sums must be centred


@pytest.mark.parametrize("kind", ["normal", "two", "grid", "offset-tail"])
def test_best_split_is_the_scans(kind):
    rng = np.random.default_rng(19)
    for n in (20, 37, 101, 400):
        x = np.sort(_sample(rng, kind, n))
        lo = max(2, int(np.ceil(0.2 * n)))
        assert checks._best_split(x, lo) == _scan(x, lo)


def test_two_clusters_are_still_reported_and_one_is_not():
    rng = np.random.default_rng(5)
    assert checks.bimodal(_sample(rng, "two", 60), "base") is not None
    assert checks.bimodal(_sample(rng, "normal", 60), "base") is None


def test_too_few_runs_without_the_binomial_of_large_sides_answers_as_with_it():
    import math

    def with_comb(n, m, alpha):
        return 2 / math.comb(n + m, n) > alpha

    for n in (1, 2, 3, 5, 8, 39, 40, 41, 100, 5000):
        for m in (1, 2, 4, 6, 40, 77, 100, 5000):
            for alpha in (0.5, 0.05, 0.001, 1e-6, 1e-19):
                assert (checks.too_few_runs(n, m, alpha) is not None) == with_comb(n, m, alpha), (n, m, alpha)


def test_whole_numbers_are_told_as_the_per_value_test_tells_them():
    from perfab.report.numbers import _whole

    for values in [(1.0, 2.0, 3.0), (1.0, 2.5), (), (float("inf"), 1.0), (float("nan"),), (-4.0, 0.0, 1e15), (0.1,)]:
        assert _whole(values) == all(float(v).is_integer() for v in values), values
