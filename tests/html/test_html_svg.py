"""The drawing helpers: scales and ticks, escaping, run-order positions."""

from __future__ import annotations

import math
import random

import pytest

from perfab.report.html.plots import SESSION_STRIDE, plan_positions
from perfab.report.html.svg import Scale, domain, dots, esc, text, tick_labels


@pytest.mark.parametrize("lo,hi", [(0.96e6, 1.05e6), (0, 1), (-0.005, 0.025), (7000, 7030), (0.0099, 0.0101),
                                   (1, 1.0001), (-3e9, 2e9), (1e-9, 3e-9)])
def test_ticks_are_round_inside_the_range_and_at_least_three(lo, hi):
    ticks = Scale(lo, hi, 0, 100).ticks(4)
    assert len(ticks) >= 3 and all(lo <= t <= hi for t in ticks)
    steps = {round((b - a) / (ticks[1] - ticks[0]), 6) for a, b in zip(ticks, ticks[1:])}
    assert steps == {1.0}
    mantissa = (ticks[1] - ticks[0]) / 10 ** math.floor(math.log10(ticks[1] - ticks[0]))
    assert round(mantissa, 6) in (1.0, 2.0, 5.0)


def test_random_ranges_always_get_three_ticks():
    rng = random.Random(7)
    for _ in range(300):
        lo = rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-6, 3)
        hi = lo + abs(lo or 1) * 10 ** rng.uniform(-6, 1)
        ticks = Scale(lo, hi, 0, 1).ticks(4)
        assert len(ticks) >= 3 and ticks[0] >= lo and ticks[-1] <= hi, (lo, hi, ticks)


def test_tick_labels_share_one_unit_per_axis():
    assert tick_labels([0, 5000, 10000]) == ["0", "5k", "10k"]
    assert tick_labels([960000, 980000, 1000000]) == ["0.96M", "0.98M", "1.00M"]
    assert tick_labels([0.25, 0.3, 0.35]) == ["0.25", "0.30", "0.35"]
    assert tick_labels([1800, 1900, 2000]) == ["1,800", "1,900", "2,000"]


def test_domain_of_equal_values_is_not_empty():
    lo, hi = domain([5.0, 5.0])
    assert lo < 5.0 < hi
    assert domain([0.0]) == (-1.0, 1.0)
    assert domain([1.0, float("inf"), float("nan")], pad=0) == (0.99, 1.01)


def test_scale_maps_and_clamps():
    s = Scale(0.0, 10.0, 100.0, 200.0)
    assert (s(0), s(5), s(10)) == (100.0, 150.0, 200.0)
    assert s.clamp(float("-inf")) == 100.0 and s.clamp(1e9) == 200.0


def test_text_and_titles_are_escaped():
    evil = '</text><script>alert(1)</script>"\''
    out = text(1, 2, evil, title=evil)
    assert "<script>" not in out and out.count("&lt;script&gt;") == 2 and "&quot;&#x27;" in out
    assert esc('"><img onerror=x>') == "&quot;&gt;&lt;img onerror=x&gt;"


def test_dots_are_one_path_of_zero_length_segments():
    assert dots([(1.5, 2.0), (3.0, 4.25)], "s0") == '<path class="dots s0" d="M1.5 2h0M3 4.25h0"/>'
    assert dots([], "s0") == ""


def test_later_sessions_are_placed_after_earlier_ones():
    orders = [SESSION_STRIDE + 0, SESSION_STRIDE + 3, 2 * SESSION_STRIDE + 1, 2 * SESSION_STRIDE + 2]
    x_of, starts = plan_positions(orders)
    xs = [x_of[o] for o in orders]
    assert xs == sorted(xs) and xs[0] == 0 and xs[1] == 3 and xs[2] - xs[1] >= 3
    assert starts == [(xs[2] - 1.5, 2)]
    assert plan_positions([5, 9]) == ({5: 5, 9: 9}, [])
