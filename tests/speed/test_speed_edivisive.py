"""E-divisive on long series: searched as block medians, at a cost bounded by ``max_points``."""

from __future__ import annotations

import numpy as np

from perfab.analyse.edivisive import EDivisive, block_medians


def _step(n: int, at: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(0, 1, at), rng.normal(1.5, 1, n - at)])


def test_a_long_series_is_the_search_of_its_block_medians():
    z = _step(1003, 301)  # at most 60 points: blocks of ceil(1003 / 60) = 17 values, 59 of them
    d = EDivisive(max_points=60).detect(z)
    assert d.block == 17 and d.n == 1003
    whole = EDivisive(max_points=10_000).detect(block_medians(z, 17))
    assert whole.block == 1 and whole.n == 59
    assert [c.index * 17 for c in whole.change_points] == [c.index for c in d.change_points]
    assert [(c.statistic, c.p) for c in whole.change_points] == [(c.statistic, c.p) for c in d.change_points]


def test_block_medians_keep_a_shorter_last_block():
    assert block_medians(np.array([1.0, 3, 2, 10, 20, 30, 7]), 3).tolist() == [2.0, 20.0, 7.0]


def test_a_short_series_is_searched_value_by_value():
    z = _step(120, 50)
    assert EDivisive(max_points=120).detect(z) == EDivisive(max_points=10_000).detect(z)
    assert EDivisive(max_points=120).detect(z).block == 1


def test_a_step_in_20000_sessions_is_found_within_one_block():
    d = EDivisive().detect(_step(20_000, 6_123))
    assert d.block == 50
    assert any(abs(c.index - 6_123) <= d.block for c in d.change_points)
