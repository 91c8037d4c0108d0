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
