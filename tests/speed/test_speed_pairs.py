"""The pairwise-difference statistics without the pairs, against sorting all n*m differences.

Every fast path is compared with the brute-force computation it replaces
(all differences materialised and sorted; the rounding triangles' mixture
solved by a 60-step bisection over all of them) on small samples with and
without ties, on both scales.  The selection rounds are forced to run by
lowering the list size, so the pivot logic is exercised, not skipped.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfab.analyse import method_exact, method_rank, methods, pairs as pairs_mod, rci
from perfab.analyse.pairs import Pairs, triangle_quantiles

RNG = np.random.default_rng(16)


def _samples(kind: str, n: int, m: int):
    if kind == "continuous":
        return RNG.lognormal(0, 0.1, n), RNG.lognormal(0.03, 0.1, m)
    if kind == "counts":
        return np.round(RNG.normal(100, 4, n)), np.round(RNG.normal(102, 4, m))
    if kind == "few-values":
        return np.round(RNG.normal(5, 0.6, n)), np.round(RNG.normal(5.3, 0.6, m))
    if kind == "signed":
        return np.round(RNG.normal(0, 2, n)), np.round(RNG.normal(1, 2, m))
    return 0.004 * np.round(RNG.normal(1, 0.01, n) / 0.004), 0.004 * np.round(RNG.normal(1.01, 0.01, m) / 0.004)


KINDS = ("continuous", "counts", "few-values", "signed", "ticks")


@pytest.fixture(params=[False, True], ids=["listed", "selected"])
def rounds(request, monkeypatch):
    """``selected``: a tiny list size and sample, so kth runs several pivot rounds."""
    if request.param:
        monkeypatch.setattr(pairs_mod, "LIST_AT_MOST", 8)
        monkeypatch.setattr(pairs_mod, "SAMPLE", 64)
    return request.param


@pytest.mark.parametrize("kind", KINDS)
def test_every_order_statistic_equals_the_sorted_differences(kind, rounds):
    a, b = _samples(kind, 23, 31)
    log = bool(np.all(a > 0) and np.all(b > 0))
    x, y = (np.log(a), np.log(b)) if log else (a, b)
    d = np.sort(np.subtract.outer(y, x).ravel())
    p = Pairs(a, b, log=log)
    assert p.total == len(d)
    assert [p.kth(k) for k in range(1, len(d) + 1)] == d.tolist()
    assert p.median() == float(np.median(d))
    for t in d[::5]:
        bigger = d[d > t]
        assert p.above(t) == (float(bigger[0]) if len(bigger) else math.inf)
    for t in np.concatenate([d[::7], d[::11] + 1e-9, [-np.inf, np.inf]]):
        assert p.count(t) == int(np.searchsorted(d, t, side="right"))
        assert p.count(t, strict=True) == int(np.searchsorted(d, t, side="left"))


def _bisect(d: np.ndarray, h: np.ndarray, prob: float) -> float:
    """The mixture-of-triangles quantile by 60-step bisection over every difference (the former code)."""
    lo, hi = float((d - h).min()), float((d + h).max())
    for _ in range(60):
        mid = (lo + hi) / 2
        z = np.clip(np.divide(mid - d, h, out=np.sign(mid - d), where=h > 0), -1.0, 1.0)
        cdf = np.where(z < 0, 0.5 * (1 + z) ** 2, 1 - 0.5 * (1 - z) ** 2).mean()
        lo, hi = (mid, hi) if cdf < prob else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize("kind", ("counts", "few-values", "ticks"))
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("band", ["closed-form", "chunked"])
def test_triangle_quantiles_equal_the_bisection_over_all_pairs(kind, log, band, rounds, monkeypatch):
    if band == "chunked":
        monkeypatch.setattr(pairs_mod, "BAND_AT_MOST", 5)
    a, b = _samples(kind, 29, 17)
    step = 0.004 if kind == "ticks" else 1.0
    p = Pairs(a, b, log=log)
    ea, eb = method_rank._rounding_errors(p, step, log)
    err = (lambda v: np.log(v / (v - step / 2))) if log else (lambda v: np.full(len(v), step / 2))
    x, y = (np.log(a), np.log(b)) if log else (a, b)
    d, h = np.subtract.outer(y, x).ravel(), np.add.outer(err(b), err(a)).ravel()
    probs = [0.5, 0.03, 0.97, 1 / len(d), 0.25]
    fast = triangle_quantiles(p, ea, eb, probs)
    for got, prob in zip(fast, probs):
        # Where the mixture CDF is flat at the probability (ties on a knot) the bisection's rounding of the
        # mean moves it by up to ~1e-8 of a step; the closed form lands on the knot.
        assert got == pytest.approx(_bisect(d, h, prob), rel=1e-12, abs=1e-7 * step)
        assert _mixture_cdf(d, h, got) == pytest.approx(prob, rel=1e-9, abs=1e-12)


def _mixture_cdf(d: np.ndarray, h: np.ndarray, t: float) -> float:
    z = np.clip((t - d) / h, -1.0, 1.0)
    return float(np.where(z < 0, 0.5 * (1 + z) ** 2, 1 - 0.5 * (1 - z) ** 2).mean())


def _brute_nonparametric(base: np.ndarray, exp: np.ndarray, confidence: float):
    """HL shift and interval with every pair built (continuous data: no grid)."""
    d = np.sort(np.subtract.outer(np.log(exp), np.log(base)).ravel())
    k = method_rank.hl_rank(len(base), len(exp), confidence)
    return float(np.median(d)), float(d[k - 1]), float(d[len(d) - k])


def test_nonparametric_on_more_pairs_than_are_listed_equals_the_brute_force():
    base, exp = RNG.lognormal(0, 0.2, 700), RNG.lognormal(0.02, 0.2, 500)  # 350,000 pairs: selection rounds run
    est = methods.AssumeNothing().compare(base, exp, 0.95)
    shift, lo, hi = _brute_nonparametric(base, exp, 0.95)
    assert (est.delta, est.lo, est.hi) == (math.expm1(shift), math.expm1(lo), math.expm1(hi))
    raw = np.sort(np.subtract.outer(exp, base).ravel())
    k = method_rank.hl_rank(700, 500, 0.95)
    assert (est.shift, est.shift_lo, est.shift_hi) == (float(np.median(raw)), float(raw[k - 1]), float(raw[-k]))


@pytest.mark.parametrize("kind", KINDS)
def test_a_look_counts_the_margin_as_the_sorted_differences_do(kind, rounds):
    base, exp = _samples(kind, 40, 35)
    got = rci.look(base, exp, 0.02, 0.05, 0.5)
    positive = bool(np.all(base > 0) and np.all(exp > 0))
    if rci.resolution(base, exp) == 0:
        d = np.sort(np.subtract.outer(np.log(exp), np.log(base)).ravel())
        up, down = math.log1p(0.02), math.log1p(-0.02)
        below, above = int(np.searchsorted(d, up, "right")), len(d) - int(np.searchsorted(d, down, "left"))
        n, m = len(base), len(exp)
        assert positive
        counted = min(1.0, 2 * rci._u_tail(below, n, m), 2 * rci._u_tail(above, n, m))
        # a look widened for serial correlation (factor > 1) is only more cautious than the counts alone
        assert got.pi == counted if got.factor == 1 else got.pi >= counted
    assert got.lo <= got.delta <= got.hi


@pytest.mark.parametrize("kind", KINDS)
def test_exact_methods_extremes_equal_those_of_all_pairs(kind):
    base, exp = _samples(kind, 13, 9)
    base = base[base != 0]
    ratios = np.divide.outer(exp, base).ravel()
    fast = method_exact._extreme_ratios(exp, base)
    assert (fast.min(), fast.max()) == (ratios.min(), ratios.max())
    est = methods.AssumeExact().compare(base, exp, 0.95)
    diffs = np.subtract.outer(exp, base).ravel()
    assert (est.shift_lo, est.shift_hi) == (diffs.min(), diffs.max())


def test_a_band_narrower_than_the_values_spacing_keeps_its_centre_pair():
    """Regression: values 1e-300..1e300 on a 1e-300 grid; the band center +- 2h rounds to the center itself, and the
    band must still hold the pairs at the center (it was empty: IndexError in solve_triangles)."""
    a = np.array([1e-300, 1e300, 0, 1e300, 1e300])
    b = np.array([0, -1e300, 1e-300, 1e-300, -1e300])
    p = Pairs(a, b)
    half = np.full(len(p.a), 0.5e-300), np.full(len(p.b), 0.5e-300)
    d = np.sort(np.subtract.outer(b, a).ravel())
    for prob, got in zip((0.5, 0.1, 0.9), triangle_quantiles(p, *half, [0.5, 0.1, 0.9])):
        # triangles 1e-300 wide vanish beside spacings of 1e300: the quantile is the differences' own
        assert got == pytest.approx(d[math.ceil(prob * len(d)) - 1], rel=1e-12)
    est = methods.get_method("nonparametric").compare(a, b, 0.95)
    assert est.shift is not None and math.isfinite(est.shift)
