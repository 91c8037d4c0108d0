"""Plots across sweep points, of user/kernel counter pairs, and of profiles.

- ``sweep_plot``    one metric against one sweep parameter: each side's
                    median with the interval of the median the analysis
                    computed (``perfab.analyse.summary``; none is drawn where
                    it has none: too few runs), joined by lines, and under
                    it each variant's delta with its interval over the
                    +-margin band.  A rate in a thread sweep is shown per
                    thread where the analysis divides it (``Summary.threads``).
                    Nothing is recomputed: the plot shows the table's numbers.
- ``split_plot``    a ``:u``/``:k`` counter pair: each side's median as one
                    bar, user and kernel parts side by side in it.
- ``profile_plot``  the symbols with the largest self time on either side,
                    the baseline's and the variant's share as paired bars.
"""

from __future__ import annotations

import math
import statistics

from perfab.analyse.compare import Row
from perfab.analyse.methods import ABSOLUTE
from perfab.analyse.summary import THREAD_PARAMS, Summary
from perfab.report.html.plots import LEFT, RIGHT, WIDTH
from perfab.report.html.svg import (Scale, clip, domain, dots, esc, figure, line, polyline, rect, side_class,
                                    text, x_axis, y_axis)
from perfab.report.numbers import fmt_value
from perfab.units import fmt_number, fmt_pct, rel_ticks

SweepPoint = tuple[str, dict[str, Summary], list[Row]]  # (parameter value, side -> summary, rows at the point)


def x_parameter(names: tuple[str, ...]) -> str:
    """The parameter on the horizontal axis: a thread count when there is one, else the first."""
    return next((n for n in names if n in THREAD_PARAMS), names[0])


def sweep_plot(points: list[SweepPoint], sides: list[str], param: str, label: str, unit: str | None,
               confidence: float) -> str:
    """Value per side and delta per variant against ``param``, as the analysis computed them."""
    sums = [s for _, by_side, _ in points for s in by_side.values()]
    per = bool(sums) and all(s.threads for s in sums)
    unit_text = (unit or "value") + (" per thread" if per else "")
    xs = Scale(-0.5, len(points) - 0.5, LEFT, WIDTH - RIGHT)
    series: dict[int, list[tuple[int, Summary]]] = {}
    for p, (_, by_side, _) in enumerate(points):
        for i, side in enumerate(sides):
            if side in by_side:
                series.setdefault(i, []).append((p, by_side[side]))
    div = (lambda s: s.threads) if per else (lambda s: 1)  # noqa: E731
    ends = [v / div(s) for pts in series.values() for _, s in pts for v in (s.median, s.lo, s.hi)]
    height = 200
    ys = Scale(*domain([v for v in ends if math.isfinite(v)]), height - 30, 22)
    body = [y_axis(ys, LEFT, WIDTH - RIGHT), _category_axis(xs, [v for v, _, _ in points], height - 30, param)]
    for i, pts in series.items():
        cls = side_class(i)
        body.append(polyline([(xs(p), ys(s.median / div(s))) for p, s in pts], f"join {cls}"))
        body += [_median(xs(p), 3 * i - 3, ys, s, div(s), f"{sides[i]}, {param}={points[p][0]}", confidence, cls)
                 for p, s in pts]
        body.append(dots([(WIDTH - RIGHT + 12, 32 + 16 * i)], cls))
        body.append(text(WIDTH - RIGHT + 20, 36 + 16 * i, clip(sides[i], 10), "side", title=sides[i]))
    caption = f"median ({unit_text}) per side, {fmt_pct(confidence, digits=3)} interval of the median"
    body.append(text(LEFT, 12, caption, "caption"))
    out = figure(WIDTH, height, "".join(body), f"{label} against {param}")
    rows = [(v, r) for v, _, r in points if r]
    return out + (_sweep_delta(rows, param, confidence) if rows else "")


def _median(x: float, dx: float, ys: Scale, s: Summary, div: float, where: str, confidence: float, cls: str) -> str:
    """One side's median at one point, its interval's whisker when the analysis has one, and both as a tooltip."""
    integral = float(s.median).is_integer() and div == 1
    num = lambda v: fmt_number(v / div, integral)  # noqa: E731
    bounded = math.isfinite(s.lo) and math.isfinite(s.hi)
    interval = f"{num(s.lo)} .. {num(s.hi)}" if bounded else "none (too few runs)"
    tip = f"{where}: median {num(s.median)}, {fmt_pct(confidence, digits=3)} interval {interval}, n={s.n}"
    whisker = line(x + dx, ys(s.lo / div), x + dx, ys(s.hi / div), f"ci {cls}") if bounded else ""
    return f'<g class="median"><title>{esc(tip)}</title>{whisker}{dots([(x, ys(s.median / div))], f"big {cls}")}</g>'


def _sweep_delta(points: list[tuple[str, list[Row]]], param: str, confidence: float) -> str:
    ends, margin = [], 0.0
    for _, rows in points:
        for r in rows:
            if r.estimate is not None and r.estimate.basis != ABSOLUTE and r.estimate.delta is not None:
                ends += [max(v, -1.0) for v in (r.estimate.delta, r.estimate.lo, r.estimate.hi) if v is not None]
                margin = max(margin, r.margin)
    if not ends:
        return ""
    height = 170
    xs = Scale(-0.5, len(points) - 0.5, LEFT, WIDTH - RIGHT)
    ys = Scale(*domain(ends, include=(0.0, -margin, margin)), height - 30, 22)
    body = [rect(LEFT, ys(margin), WIDTH - RIGHT - LEFT, ys(-margin) - ys(margin), "margin"),
            y_axis(ys, LEFT, WIDTH - RIGHT, fmt=rel_ticks),
            _category_axis(xs, [v for v, _ in points], height - 30, param),
            line(LEFT, ys(0), WIDTH - RIGHT, ys(0), "zero")]
    for p, (_, rows) in enumerate(points):
        for i, r in enumerate(rows):
            e = r.estimate
            if e is None or e.basis == ABSOLUTE or e.delta is None:
                continue
            x = xs(p) + 4 * i
            cls = side_class(i + 1)
            body.append(line(x, ys.clamp(max(e.lo, -1.0)), x, ys.clamp(e.hi), f"ci {cls}"))
            body.append(dots([(x, ys.clamp(e.delta))], f"big {cls}"))
            body.append(text(x + 5, ys.clamp(e.delta) - 5, r.verdict, "mark"))
    caption = f"delta per variant, {fmt_pct(confidence, digits=3)} interval; band = +-margin"
    body.append(text(LEFT, 12, caption, "caption"))
    return figure(WIDTH, height, "".join(body), f"delta of {points[0][1][0].label} against {param}")


def _category_axis(xs: Scale, labels: list[str], y: float, name: str) -> str:
    out = [line(xs.a, y, xs.b, y, "axis")]
    for p, label in enumerate(labels):
        out.append(line(xs(p), y, xs(p), y + 4, "axis") + text(xs(p), y + 15, clip(label, 10), "tick", "middle"))
    out.append(text(xs.b, y + 27, name, "tick", "end"))
    return "".join(out)


def split_plot(user: list[Row], kernel: list[Row], baseline: str) -> str:
    """Each side's median of a counter as one bar: its user part, then its kernel part."""
    names = [baseline] + [r.variant for r in user]
    med = lambda vals: float(statistics.median(vals)) if vals else 0.0  # noqa: E731
    u = [med(user[0].base_values)] + [med(r.exp_values) for r in user]
    k = [med(kernel[0].base_values)] + [med(r.exp_values) for r in kernel]
    band = 24
    height = 26 + band * len(names) + 22
    xs = Scale(0, max([a + b for a, b in zip(u, k)] + [1e-300]) * 1.05, LEFT, WIDTH - RIGHT)
    body = [x_axis(xs, height - 22)]
    for i, name in enumerate(names):
        y = 24 + band * i
        total = u[i] + k[i]
        body.append(text(LEFT - 8, y + 13, clip(name, 15), "side", "end", title=name))
        body.append(rect(LEFT, y + 3, xs(u[i]) - LEFT, band - 8, f"user {side_class(i)}",
                         title=f"user {fmt_value(user[0], u[i])}"))
        body.append(rect(xs(u[i]), y + 3, xs(total) - xs(u[i]), band - 8, f"kernel {side_class(i)}",
                         title=f"kernel {fmt_value(kernel[0], k[i])}"))
        share = f"{100 * k[i] / total:.1f}% :k" if total else "-"
        body.append(text(WIDTH - RIGHT + 6, y + 14, share, "value"))
    body.append(text(LEFT, 12, "median per side: dark = :u (user), light = :k (kernel)", "caption"))
    return figure(WIDTH, height, "".join(body), f"user/kernel split of {user[0].label}")


def profile_plot(rows, baseline: str, variant: str, limit: int = 15) -> str:
    """Paired bars of self-time share (% of samples) for the ``limit`` largest symbols on either side."""
    top = sorted(rows, key=lambda r: -max(r.base_mean, r.exp_mean))[:limit]
    if not top:
        return ""
    left, band = 230, 22
    height = 24 + band * len(top) + 24
    xs = Scale(0, max(max(r.base_mean, r.exp_mean) for r in top) * 1.1 or 1.0, left, WIDTH + 120 - RIGHT)
    body = [x_axis(xs, height - 22, unit="%")]
    for i, r in enumerate(top):
        y = 22 + band * i
        name = _symbol(r.symbol)
        body.append(text(left - 6, y + 14, clip(name, 34) + (" *" if r.significant else ""), "side", "end",
                         title=r.symbol))
        body.append(rect(left, y + 3, xs(r.base_mean) - left, 7, side_class(0),
                         title=f"{baseline}: {r.base_mean:.2f}%"))
        body.append(rect(left, y + 11, xs(r.exp_mean) - left, 7, side_class(1),
                         title=f"{variant}: {r.exp_mean:.2f}%"))
        body.append(text(WIDTH + 120 - RIGHT + 6, y + 14, f"{r.delta_pp:+.1f} pp", "value"))
    body.append(text(left, 12, f"self time, % of samples: upper bar {baseline}, lower bar {variant}", "caption"))
    return figure(WIDTH + 120, height, "".join(body), f"profile of {baseline} and {variant}")


def _symbol(key: str) -> str:
    """``sym`` from ``self.<event>:<level>.<sym>`` (the key itself when it is not in that form)."""
    if key.startswith("self."):
        rest = key[5:]
        dot = rest.find(".", rest.find(":") + 1) if ":" in rest else -1
        if dot > 0:
            return rest[dot + 1:]
    return key
