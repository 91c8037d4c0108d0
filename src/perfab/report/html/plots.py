"""The report's plots of one metric: every run per side, the delta against the margin, the run order.

Each function takes the rows of one metric at one sweep point (one row per
experiment variant, all sharing the baseline's samples) and returns an
``<svg>``:

- ``runs_plot``   a strip plot: every run's value per side, jittered
                  vertically, with the side's median as a bar and its value;
- ``delta_plot``  each variant's delta with its interval, drawn over the
                  shaded +-margin band and the zero line, with the verdict,
                  so ``**`` (interval beyond the band), ``flat`` (inside it)
                  and ``ns`` (neither) can be seen;
- ``order_plot``  value against position in the plan per side; a side with a
                  drift warning gets its least-squares trend line and a mark.

A side with more than ``DOTS_PER_SIDE`` runs is drawn as that many runs
evenly spaced in run order (medians and trends use every run), and the
caption says how many were drawn.  Likewise the run-order plot marks at
most ``SESSION_MARKS`` session starts, evenly spaced, so a page stays a
few hundred kilobytes however many runs and sessions it reports.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from perfab.analyse.compare import Row
from perfab.analyse.diagnostics import Kind
from perfab.analyse.methods import ABSOLUTE
from perfab.analyse.verdicts import Verdict
from perfab.report.document import mark
from perfab.report.html.svg import (Scale, clip, domain, dots, figure, jitter, line, rect, side_class, text,
                                    x_axis, y_axis)
from perfab.report.numbers import fmt_delta, fmt_value
from perfab.units import fmt_pct, rel_ticks

WIDTH = 460  # pixels of every plot; the page scales them down on narrow screens
LEFT = 110  # room for side names
RIGHT = 90  # room for medians and verdicts
ORDER_WIDTH = 2 * WIDTH + 18  # the run-order plot spans the runs and delta plots above it
SESSION_STRIDE = 10_000_000  # perfab.store.RunInfo.order: session * stride + plan position
DOTS_PER_SIDE = 1000  # runs drawn per side and plot at most; beyond, evenly spaced runs (the caption says so)
SESSION_MARKS = 12  # session starts marked in a run-order plot at most; beyond, evenly spaced ones (caption says)


def shown(count: int, limit: int = DOTS_PER_SIDE) -> list[int]:
    """Indices of the runs drawn of a side with ``count`` runs: all, or ``limit`` evenly spaced ones."""
    if count <= limit:
        return list(range(count))
    return sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})


def _thinned(data) -> str:
    """The caption's note when some side has more runs than are drawn ('' when every run is)."""
    most = max((len(vals) for _, vals, _ in data), default=0)
    return "" if most <= DOTS_PER_SIDE else f"; {DOTS_PER_SIDE:,} evenly spaced of up to {most:,} runs per side drawn"


def sides(rows: list[Row], baseline: str) -> list[tuple[str, tuple[float, ...], tuple[int, ...]]]:
    """(side, values, plan positions) of the baseline and each variant, in report order."""
    first = rows[0]
    return [(baseline, first.base_values, first.base_order)] + [(r.variant, r.exp_values, r.exp_order) for r in rows]


def runs_plot(rows: list[Row], baseline: str) -> str:
    """Every run's value per side, with the medians."""
    data = sides(rows, baseline)
    band = 26
    height = 24 + band * len(data) + 36
    xs = Scale(*domain([v for _, vals, _ in data for v in vals]), LEFT, WIDTH - RIGHT)
    body = [x_axis(xs, height - 34, title=_unit(rows[0]))]
    for i, (side, vals, _) in enumerate(data):
        mid = 24 + band * i + band / 2
        finite = [v for v in vals if math.isfinite(v)]
        body.append(text(LEFT - 8, mid + 4, clip(side, 15), "side", "end", title=side))
        body.append(dots([(xs.clamp(finite[j]), mid + jitter(j, band * 0.3)) for j in shown(len(finite))],
                          side_class(i)))
        if finite:
            med = float(statistics.median(finite))
            body.append(line(xs(med), mid - band * 0.45, xs(med), mid + band * 0.45, f"median {side_class(i)}"))
            body.append(text(WIDTH - RIGHT + 6, mid + 4, fmt_value(rows[0], med), "value"))
    body.append(text(LEFT, 14, f"every run ({_unit(rows[0])}); bar = median{_thinned(data)}", "caption"))
    return figure(WIDTH, height, "".join(body), f"runs of {rows[0].label} per side")


def delta_plot(rows: list[Row], confidence: float) -> str:
    """Each variant's delta and interval against the +-margin band (in percent, or in the unit when absolute)."""
    est = [r for r in rows if r.estimate is not None]
    if not est:
        return ""
    absolute = any(r.estimate.basis == ABSOLUTE for r in est)
    band = 26
    height = 24 + band * len(rows) + 36
    ends = [v for r in est for v in _interval(r, absolute) if v is not None]
    margin = 0.0 if absolute else max(r.margin for r in est)
    xs = Scale(*domain(ends, include=(0.0, -margin, margin)), LEFT, WIDTH - RIGHT)
    body = []
    top, bottom = 18, height - 34
    if margin:
        body.append(rect(xs(-margin), top, xs(margin) - xs(-margin), bottom - top, "margin",
                         title=f"+-{fmt_pct(margin)} margin: inside it a change counts as none (flat)"))
    axis = f"change in {_unit(rows[0])}" if absolute else "change against the baseline"
    body.append(x_axis(xs, bottom, fmt=None if absolute else rel_ticks, unit="", title=axis))
    body.append(line(xs(0), top, xs(0), bottom, "zero"))
    for i, r in enumerate(rows):
        mid = top + 6 + band * i + band / 2
        body.append(text(LEFT - 8, mid + 4, clip(r.variant, 15), "side", "end", title=r.variant))
        if r.estimate is None:
            continue
        center, lo, hi = _interval(r, absolute)
        if lo is not None and hi is not None:
            body.append(line(xs.clamp(lo), mid, xs.clamp(hi), mid, f"ci {side_class(i + 1)}"))
            for end in (lo, hi):
                if math.isfinite(end):
                    body.append(line(xs(end), mid - 6, xs(end), mid + 6, f"ci {side_class(i + 1)}"))
        if center is not None and math.isfinite(center):
            body.append(dots([(xs.clamp(center), mid)], f"big {side_class(i + 1)}"))
        body.append(text(WIDTH - RIGHT + 6, mid + 4, f"{fmt_delta(r)} {mark(r)}", f"verdict {verdict_class(r)}"))
    what = "change in the metric's unit (baseline median 0)" if absolute else \
        f"delta, {fmt_pct(confidence, digits=3)} interval; band = +-margin"
    body.append(text(LEFT, 12, what, "caption"))
    return figure(WIDTH, height, "".join(body), f"delta of {rows[0].label} with its interval")


def plan_positions(orders: list[int]) -> tuple[dict[int, float], list[tuple[float, int]]]:
    """x of each run-order key (``RunInfo.order``: session, then plan position), later sessions placed after
    earlier ones; and (x, session) where each session after the first begins."""
    by_session: dict[int, list[int]] = {}
    for o in sorted(set(orders)):
        by_session.setdefault(o // SESSION_STRIDE, []).append(o % SESSION_STRIDE)
    x_of, starts, offset = {}, [], 0.0
    for k, (session, seqs) in enumerate(sorted(by_session.items())):
        shift = offset - (min(seqs) if k else 0)
        if k:
            starts.append((offset - 1.5, session))
        for seq in seqs:
            x_of[session * SESSION_STRIDE + seq] = seq + shift
        offset = max(seqs) + shift + 3
    return x_of, starts


def order_plot(rows: list[Row], baseline: str) -> str:
    """Value against position in the plan, per side; drifting sides get a trend line and a mark."""
    data = sides(rows, baseline)
    width, height, right = ORDER_WIDTH, 190, RIGHT + 40
    drifting = drift_sides(rows)
    x_of, starts = plan_positions([o for _, _, order in data for o in order])
    ys_all = [v for _, vals, _ in data for v in vals]
    if not x_of:
        return ""
    xs = Scale(*domain(list(x_of.values()), pad=0.03), LEFT, width - right)
    ys = Scale(*domain(ys_all), height - 30, 22)
    body = [y_axis(ys, LEFT, width - right),
            x_axis(xs, height - 30, title="position in the plan") if not starts else ""]
    for x, session in (starts[i] for i in shown(len(starts), SESSION_MARKS)):
        body.append(line(xs(x), 22, xs(x), height - 30, "zero") + text(xs(x) + 3, 30, f"session {session}", "tick"))
    for i, (side, vals, order) in enumerate(data):
        xpos = [x_of[o] for o in order]
        finite = [(x, v) for x, v in zip(xpos, vals) if math.isfinite(v)]
        body.append(dots([(xs(finite[j][0]), ys.clamp(finite[j][1])) for j in shown(len(finite))], side_class(i)))
        if side in drifting and len(finite) >= 2:
            body.append(_trend(xpos, vals, xs, ys, side_class(i)))
        legend_y = 36 + 16 * i
        mark = " \u26a0 drift" if side in drifting else ""
        body.append(dots([(width - right + 12, legend_y - 4)], side_class(i)))
        body.append(text(width - right + 20, legend_y, clip(side, 14) + mark, "side" + (" warn" if mark else ""),
                         title=side))
    marked = "" if len(starts) <= SESSION_MARKS else f"; {SESSION_MARKS} of {len(starts):,} session starts marked"
    body.append(text(LEFT, 12, f"value ({_unit(rows[0])}) by position in the run plan{_thinned(data)}{marked}",
                     "caption"))
    if starts:
        body.append(line(xs.a, height - 30, xs.b, height - 30, "axis"))
    return figure(width, height, "".join(body), f"{rows[0].label} in run order")


def drift_sides(rows: list[Row]) -> set[str]:
    """Sides named in a drift diagnostic of these rows."""
    return {d.data["side"] for r in rows for d in r.warnings if d.kind == Kind.DRIFT}


def _trend(xpos, vals, xs: Scale, ys: Scale, cls: str) -> str:
    x = np.array(xpos, dtype=float)
    y = np.array(vals, dtype=float)
    keep = np.isfinite(y)
    if keep.sum() < 2 or np.ptp(x[keep]) == 0:
        return ""
    slope, icpt = np.polyfit(x[keep], y[keep], 1)
    x0, x1 = float(x[keep].min()), float(x[keep].max())
    return line(xs(x0), ys.clamp(slope * x0 + icpt), xs(x1), ys.clamp(slope * x1 + icpt), f"trend {cls}")


def _interval(r: Row, absolute: bool) -> tuple[float | None, float | None, float | None]:
    e = r.estimate
    if absolute or e.delta is None:
        return e.shift, e.shift_lo, e.shift_hi
    return e.delta, _ratio_end(e.lo), e.hi


def _ratio_end(x: float | None) -> float | None:
    """An interval end of a ratio change, clipped at -100% (a value cannot fall below zero)."""
    return None if x is None else max(x, -1.0)


def _unit(r: Row) -> str:
    return r.unit or "value"


def verdict_class(r: Row) -> str:
    """The style of a verdict: better, worse, changed (no direction), flat or ns."""
    if r.verdict == Verdict.CHANGE:
        if r.regressed:
            return "worse"
        return "changed" if r.higher_is_better is None else "better"
    return "flat" if r.verdict in (Verdict.FLAT, Verdict.VALID) else ("worse" if r.verdict == Verdict.INVALID else "ns")
