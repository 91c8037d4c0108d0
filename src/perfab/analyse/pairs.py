"""Order statistics of the n*m pairwise differences ``b_j - a_i`` without materialising them.

The Hodges-Lehmann estimator and its interval are order statistics of all
n*m differences between the experiment's and the baseline's values; with
50,000 runs per side that is 2.5e9 numbers (18.6 GiB).  Here they are read
off the two sorted samples instead, in O((n+m) log(n+m)) time and O(n+m)
memory per statistic:

- ``kth``: the k-th smallest difference by randomized selection over the
  implicit sorted matrix (each row ``b_j - a_i`` is sorted in ``i``):
  pivots are drawn from the remaining candidates, the differences below
  and at them are counted row by row with a binary search, and the
  candidate set shrinks to the pivots' bracket, until few enough
  candidates are left to list and sort (the method of Johnson &
  Mizoguchi, "Selecting the Kth element in X+Y and X1+X2+...+Xm", SIAM J.
  Comput. 7 (1978) 147-153, in its randomized form; Monahan, "Algorithm
  616: fast computation of the Hodges-Lehmann location estimator", ACM
  TOMS 10 (1984) 265-270, uses the same scheme for the one-sample
  estimator).
- ``count``: how many differences lie below a value (the rank-sum count
  of the margin test).
- ``triangle_quantiles``: quantiles of the mixture of triangles centred on
  the differences (the rounding model of coarse data in
  ``methods.AssumeNothing``): a quantile lies within the largest half-width
  ``h`` of the same order statistic of the differences, so only the pairs
  within ``2h`` of it are listed; the others add 0 or 1 to the mixture CDF.

Values are first merged into distinct values with counts: data on a grid
(whole counts, a coarse clock) then have few rows, whatever the runs.
Every comparison is made on the computed difference ``fl(b_j - a_i)``
itself, so the results equal those of sorting all n*m differences.
"""

from __future__ import annotations

import math

import numpy as np

LIST_AT_MOST = 1 << 18  # candidates listed and sorted outright once no more are left
SAMPLE = 1 << 16  # at most this many candidates drawn per selection round to place its two pivots
BAND_AT_MOST = 1 << 21  # pairs near a quantile listed at once in triangle_quantiles (a chunk beyond)


class Pairs:
    """The differences ``b_j - a_i`` of two samples, as distinct values with counts on each side.

    With ``log`` the differences are of the values' logarithms (a ratio);
    ``raw_a`` and ``raw_b`` keep the distinct values themselves.
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, log: bool = False):
        self.raw_a, wa = np.unique(np.asarray(a, dtype=float), return_counts=True)  # distinct baseline values
        self.raw_b, self.wb = np.unique(np.asarray(b, dtype=float), return_counts=True)  # distinct experiment values
        self.a, self.b = (np.log(self.raw_a), np.log(self.raw_b)) if log else (self.raw_a, self.raw_b)  # compared
        self.cwa = np.concatenate([[0], np.cumsum(wa)])  # cumulative counts of the baseline values
        self.wa = wa  # count of each distinct baseline value
        self.total = int(self.cwa[-1]) * int(self.wb.sum())  # n*m
        self._sorted = None  # (differences, cumulative counts) once sorted, when there are few distinct pairs

    def cut(self, t: float, strict: bool) -> np.ndarray:
        """Per row j, the first i from which every ``b_j - a_i`` is < t (``strict``) or <= t."""
        a, b, n = self.a, self.b, len(self.a)
        if t == math.inf:
            return np.zeros(len(b), dtype=np.int64)
        if t == -math.inf:
            return np.full(len(b), n, dtype=np.int64)
        idx = np.searchsorted(a, b - t, side="right" if strict else "left").astype(np.int64)
        below = (lambda d: d < t) if strict else (lambda d: d <= t)
        while True:  # the guess can be off by a rounding; move to where fl(b - a) itself crosses t
            back = (idx > 0) & below(b - a[np.maximum(idx - 1, 0)])
            ahead = (idx < n) & ~below(b - a[np.minimum(idx, n - 1)])
            if not back.any() and not ahead.any():
                return idx
            idx = idx - back + ahead

    def count(self, t: float, strict: bool = False) -> int:
        """How many of the n*m differences are < t (``strict``) or <= t."""
        idx = self.cut(t, strict)
        return int(np.dot(self.wb, self.cwa[-1] - self.cwa[idx]))

    def kth(self, k: int) -> float:
        """The k-th smallest difference (1-based), as ``np.sort(all differences)[k - 1]``.

        Each round draws up to ``SAMPLE`` candidates at random, takes the two
        sampled values that bracket rank k with a margin of a few standard
        errors (Floyd & Rivest, "Algorithm 489: SELECT", CACM 18 (1975) 173),
        counts the differences below each, and keeps the candidates between
        them: about 2% of them per round, so three or four rounds reach a
        list short enough to sort.
        """
        if not 1 <= k <= self.total:
            raise ValueError(f"rank {k} outside 1..{self.total}")
        if len(self.a) * len(self.b) <= LIST_AT_MOST:  # few distinct pairs: sort them once for every rank
            if self._sorted is None:
                d, w = self.listed(np.zeros(len(self.b), dtype=np.int64), np.full(len(self.b), len(self.a)))
                order = np.argsort(d, kind="stable")
                self._sorted = d[order], np.cumsum(w[order])
            d, cw = self._sorted
            return float(d[np.searchsorted(cw, k, side="left")])
        rng = np.random.default_rng(k)
        start, stop = self.cut(math.inf, True), self.cut(-math.inf, False)  # candidates: i in [start_j, stop_j)
        while True:
            sizes = stop - start
            listed = int(sizes.sum())
            below = self._count_at_most(stop)
            if listed <= LIST_AT_MOST:
                return self._kth_listed(start, sizes, k - below)
            pivots = self._pivots(start, stop, k - below, rng)
            cuts = [(self.cut(p, True), self.cut(p, False)) for p in pivots]
            counts = [(self._count_at_most(lt), self._count_at_most(le)) for lt, le in cuts]
            for p, (lt, le) in zip(pivots, counts):
                if lt < k <= le:
                    return p
            if k <= counts[0][0]:
                start = cuts[0][0]
            elif k > counts[1][1]:
                stop = cuts[1][1]
            else:
                start, stop = cuts[1][0], cuts[0][1]

    def _pivots(self, start: np.ndarray, stop: np.ndarray, rank: int, rng) -> tuple[float, float]:
        """Two sampled candidates that most likely bracket the candidate of rank ``rank`` (counts as weights)."""
        weights = self.wb * (self.cwa[stop] - self.cwa[start])  # differences per row among the candidates
        ends = np.cumsum(weights)
        size = min(SAMPLE, max(256, int(int(ends[-1]) ** (2 / 3))))
        picks = np.sort(rng.integers(int(ends[-1]), size=size))  # sorted: the searches below run faster
        rows = np.searchsorted(ends, picks, side="right")
        within = (picks - (ends[rows] - weights[rows])) // self.wb[rows]
        i = np.searchsorted(self.cwa, self.cwa[start[rows]] + within, side="right") - 1
        values = np.sort(self.b[rows] - self.a[i])
        pos, margin = rank / int(ends[-1]) * size, 3 * math.sqrt(size)
        return float(values[max(int(pos - margin), 0)]), float(values[min(int(pos + margin), size - 1)])

    def _count_at_most(self, idx: np.ndarray) -> int:
        """The number of differences in the suffixes ``i >= idx_j`` of every row."""
        return int(np.dot(self.wb, self.cwa[-1] - self.cwa[idx]))

    def _kth_listed(self, start: np.ndarray, sizes: np.ndarray, r: int) -> float:
        d, w = self.listed(start, sizes)
        order = np.argsort(d, kind="stable")
        return float(d[order][np.searchsorted(np.cumsum(w[order]), r, side="left")])

    def listed(self, start: np.ndarray, sizes: np.ndarray, rows: slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """The differences of rows ``rows`` at i in [start_j, start_j + sizes_j), with their counts."""
        i, j = self.indices(start, sizes, rows)
        return self.b[j] - self.a[i], self.wb[j] * self.wa[i]

    def indices(self, start: np.ndarray, sizes: np.ndarray, rows: slice = slice(None)):
        """(i, j) of the pairs in [start_j, start_j + sizes_j) of rows ``rows``."""
        start, sizes = start[rows], sizes[rows]
        j = np.repeat(np.arange(len(self.b))[rows], sizes)
        offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        return np.repeat(start, sizes) + offsets, j

    def median(self) -> float:
        """``np.median`` of all the differences."""
        half = self.total // 2
        if self.total % 2:
            return self.kth(half + 1)
        lower = self.kth(half)
        return (lower + (lower if self.count(lower) > half else self.above(lower))) / 2

    def above(self, t: float) -> float:
        """The smallest difference greater than ``t`` (inf when none is)."""
        idx = self.cut(t, False)  # row j: b_j - a_i > t for i < idx_j, the largest of them at idx_j - 1
        rows = idx > 0
        if not rows.any():
            return math.inf
        return float((self.b[rows] - self.a[idx[rows] - 1]).min())

    def order_interval(self, k: int) -> tuple[float, float, float]:
        """(median, k-th smallest, k-th largest): the Hodges-Lehmann shift and its interval at rank k."""
        shift = self.median()
        if k < 1:
            return shift, -math.inf, math.inf
        return shift, self.kth(k), self.kth(self.total + 1 - k)


def triangle_quantiles(pairs: Pairs, ea: np.ndarray, eb: np.ndarray, probs) -> list[float]:
    """Quantiles of the mixture of triangles centred on every ``b_j - a_i`` with half-width ``ea_i + eb_j``.

    ``ea`` and ``eb`` are per distinct value of each side (``pairs.a``,
    ``pairs.b``).  The mixture's quantile at p lies within ``h`` (the
    largest half-width) of the k-th difference, k = ceil(p nm): below
    ``d_(k) - h`` the CDF is under p, at ``d_(k) + h`` it is at least p.  So
    only the pairs within ``2h`` of ``d_(k)`` are listed (the rest count 1
    or 0 there) and the quantile solves the piecewise quadratic CDF in
    closed form (``solve_triangles``).
    """
    h = float(ea.max() + eb.max())
    out = []
    for p in probs:
        k = min(max(math.ceil(p * pairs.total), 1), pairs.total)
        center = pairs.kth(k)
        start, stop = pairs.cut(center + 2 * h, False), pairs.cut(center - 2 * h, True)  # [c-2h, c+2h]: has c
        below = pairs._count_at_most(stop)
        sizes = stop - start
        if int(sizes.sum()) <= BAND_AT_MOST:
            i, j = pairs.indices(start, sizes)
            d, w = pairs.b[j] - pairs.a[i], pairs.wb[j] * pairs.wa[i]
            out.append(solve_triangles(d, eb[j] + ea[i], w.astype(float), p * pairs.total - below))
        else:
            out.append(_bisect_band(pairs, start, sizes, ea, eb, p * pairs.total - below, center - h, center + h))
    return out


def solve_triangles(d: np.ndarray, h: np.ndarray, w: np.ndarray, target: float) -> float:
    """The smallest t with ``sum(w * TriangleCDF((t - d) / h)) >= target``, in closed form.

    The weighted CDF is quadratic between the knots ``d - h, d, d + h``:
    the coefficients are accumulated over the sorted knots and the quantile
    solves one quadratic on its segment.
    """
    ref = float(np.median(d))
    # a half-width lost below float precision (a step far smaller than the values) is a near point mass
    h = np.maximum(h, np.finfo(float).eps * max(1.0, float(np.max(np.abs(d))) if len(d) else 1.0))
    a, c, b = d - h - ref, d - ref, d + h - ref
    s = w / (2 * h * h)  # each triangle: s (t - a)^2 on [a, c), w - s (b - t)^2 on [c, b), w beyond
    knots = np.concatenate([a, c, b])
    c2 = np.concatenate([s, -2 * s, s])
    c1 = np.concatenate([-2 * s * a, 2 * s * (a + b), -2 * s * b])
    c0 = np.concatenate([s * a * a, w - s * (a * a + b * b), s * b * b])
    order = np.argsort(knots, kind="stable")
    knots, c2, c1, c0 = knots[order], np.cumsum(c2[order]), np.cumsum(c1[order]), np.cumsum(c0[order])
    at_knots = (c2 * knots + c1) * knots + c0  # the weighted CDF at each knot, from the right
    k = int(np.clip(np.searchsorted(at_knots, target, side="left") - 1, 0, len(knots) - 1))
    lo, hi = knots[k], knots[min(k + 1, len(knots) - 1)]
    return ref + segment_root(float(c2[k]), float(c1[k]), float(c0[k] - target), float(lo), float(hi))


def segment_root(q2: float, q1: float, q0: float, lo: float, hi: float) -> float:
    """The root of ``q2 t^2 + q1 t + q0`` (increasing on [lo, hi]) that lies in [lo, hi]."""
    if abs(q2) * max(abs(lo), abs(hi), hi - lo) <= 1e-12 * abs(q1):
        t = -q0 / q1 if q1 else lo
    else:
        disc = math.sqrt(max(q1 * q1 - 4 * q2 * q0, 0.0))
        roots = ((-q1 - disc) / (2 * q2), (-q1 + disc) / (2 * q2))
        t = min(roots, key=lambda r: max(lo - r, r - hi, 0.0))
    return min(max(t, lo), hi)


def _bisect_band(pairs: Pairs, start, sizes, ea, eb, target: float, lo: float, hi: float) -> float:
    """The same quantile by bisection, the band's pairs listed a chunk of rows at a time (bounded memory)."""
    bounds = np.searchsorted(np.cumsum(sizes), np.arange(0, int(sizes.sum()), BAND_AT_MOST), side="right")
    chunks = [slice(int(x), int(y)) for x, y in zip(bounds, list(bounds[1:]) + [len(sizes)]) if y > x]
    for _ in range(60):
        mid = (lo + hi) / 2
        cdf = 0.0
        for rows in chunks:
            i, j = pairs.indices(start, sizes, rows)
            h = eb[j] + ea[i]
            z = np.clip((mid - (pairs.b[j] - pairs.a[i])) / h, -1.0, 1.0)
            cdf += float(np.dot(pairs.wb[j] * pairs.wa[i], np.where(z < 0, 0.5 * (1 + z) ** 2, 1 - 0.5 * (1 - z) ** 2)))
        lo, hi = (mid, hi) if cdf < target else (lo, mid)
    return (lo + hi) / 2
