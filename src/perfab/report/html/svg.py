"""Static SVG drawing for the HTML report: scales, axes, dots, intervals.

Every function returns SVG markup as a string; nothing here runs in the
browser.  Points are drawn as zero-length path segments with round caps
(``M x y h0``), one ``<path>`` per side, so a plot of hundreds of runs
stays a few kilobytes.  Colours come from the page's style sheet through
the classes ``s0``..``s7`` (one per side, the baseline first), so the
markup carries no style of its own.  Every piece of text passes through
``esc``: labels, side names and symbols come from specs and workloads.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

PALETTE_SIZE = 8  # side colour classes s0..s7 in the style sheet; more sides reuse them


def esc(text: object) -> str:
    """Text safe in HTML and inline SVG, as element content or a quoted attribute value."""
    return html.escape(str(text), quote=True)


def side_class(i: int) -> str:
    """The colour class of the ``i``-th side (0: the baseline)."""
    return f"s{i % PALETTE_SIZE}"


@dataclass(frozen=True)
class Scale:
    """A linear map from the data interval [lo, hi] to the pixel interval [a, b]."""

    lo: float  # data value drawn at pixel a
    hi: float  # data value drawn at pixel b
    a: float  # pixel coordinate of lo
    b: float  # pixel coordinate of hi

    def __call__(self, v: float) -> float:
        t = (float(v) - self.lo) / (self.hi - self.lo)  # float(): rounding a numpy scalar is 20x slower
        return round(self.a + t * (self.b - self.a), 1)

    def clamp(self, v: float) -> float:
        """The pixel of ``v``, held to the drawn range (for unbounded interval ends)."""
        return self(min(max(float(v), self.lo), self.hi))

    def ticks(self, count: int = 5) -> list[float]:
        """About ``count`` (at least 3) round values, steps of 1, 2 or 5 times a power of ten, inside [lo, hi]."""
        raw = (self.hi - self.lo) / max(1, count)
        for _ in range(4):
            step = nice_step(raw)
            first, last = math.ceil(self.lo / step - 1e-9), math.floor(self.hi / step + 1e-9)
            if last - first >= 2:
                break
            raw = step / 2.5
        return [round(k * step, 12) for k in range(first, last + 1)]


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``raw``."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))


def domain(values: list[float], pad: float = 0.06, include: tuple[float, ...] = ()) -> tuple[float, float]:
    """A data interval holding ``values`` and ``include`` with ``pad`` of its width either side."""
    finite = [float(v) for v in (*values, *include) if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if hi == lo:
        half = abs(lo) * 0.01 or 1.0
        return lo - half, hi + half
    width = hi - lo
    return lo - pad * width, hi + pad * width


def tick_labels(ticks: list[float]) -> list[str]:
    """Short axis labels in one style for the whole axis: k, M or G from the largest tick's size, and as many
    decimals as the step between ticks needs."""
    if not ticks:
        return []
    step = ticks[1] - ticks[0] if len(ticks) > 1 else (abs(ticks[0]) or 1.0)
    top = max(abs(t) for t in ticks)
    div, suffix = next(((d, s) for limit, d, s in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k"))
                        if top >= limit), (1.0, ""))
    decimals = max(0, -math.floor(math.log10(step / div) + 1e-9))
    return ["0" if t == 0 else f"{t / div:,.{decimals}f}{suffix}" for t in ticks]


def dots(points: list[tuple[float, float]], cls: str) -> str:
    """One path of round dots at ``points`` (pixel coordinates)."""
    if not points:
        return ""
    d = "".join(f"M{x:g} {y:g}h0" for x, y in points)
    return f'<path class="dots {cls}" d="{d}"/>'


def line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line class="{cls}" x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}"/>'


def polyline(points: list[tuple[float, float]], cls: str) -> str:
    if len(points) < 2:
        return ""
    return f'<polyline class="{cls}" points="{" ".join(f"{x:g},{y:g}" for x, y in points)}"/>'


def rect(x: float, y: float, w: float, h: float, cls: str, title: str | None = None) -> str:
    tip = f"<title>{esc(title)}</title>" if title else ""
    return f'<rect class="{cls}" x="{x:g}" y="{y:g}" width="{max(w, 0):g}" height="{max(h, 0):g}">{tip}</rect>'


def text(x: float, y: float, content: str, cls: str = "", anchor: str = "start", title: str | None = None) -> str:
    """A label; ``content`` is escaped here, ``title`` becomes a tooltip (the full text of a clipped label)."""
    tip = f"<title>{esc(title)}</title>" if title else ""
    klass = f' class="{cls}"' if cls else ""
    return f'<text{klass} x="{x:g}" y="{y:g}" text-anchor="{anchor}">{tip}{esc(content)}</text>'


def clip(label: str, width: int) -> str:
    """``label`` cut to ``width`` characters, with an ellipsis when cut."""
    return label if len(label) <= width else label[: width - 1] + "\u2026"


def x_axis(scale: Scale, y: float, count: int = 5, fmt=None, unit: str = "", title: str = "") -> str:
    """Grid lines and labels for the horizontal ``scale``, its baseline at pixel ``y``; ``fmt`` labels the
    ticks (a list of values -> a list of labels), ``title`` names the axis below its right end."""
    ticks = scale.ticks(count)
    labels = fmt(ticks) if fmt else tick_labels(ticks)
    out = [line(scale.a, y, scale.b, y, "axis")]
    for t, label in zip(ticks, labels):
        x = scale(t)
        out.append(line(x, y, x, y + 4, "axis") + text(x, y + 15, label + unit, "tick", "middle"))
    if title:
        out.append(text(scale.b, y + 28, title, "axis-title", "end"))
    return "".join(out)


def y_axis(scale: Scale, x0: float, x1: float, count: int = 4, fmt=None) -> str:
    """Horizontal grid lines and labels for the vertical ``scale``, labels left of pixel ``x0``."""
    ticks = scale.ticks(count)
    labels = fmt(ticks) if fmt else tick_labels(ticks)
    out = [line(x0, scale.a, x0, scale.b, "axis")]
    for t, label in zip(ticks, labels):
        y = scale(t)
        out.append(line(x0, y, x1, y, "grid") + text(x0 - 4, y + 3.5, label, "tick", "end"))
    return "".join(out)


def figure(width: int, height: int, body: str, label: str, cls: str = "plot") -> str:
    """An ``<svg>`` of the given size (scaling down with the page) with an accessible name."""
    return (f'<svg class="{cls}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">{body}</svg>')


def jitter(i: int, spread: float) -> float:
    """A deterministic offset in [-spread, spread] for the ``i``-th dot (golden-ratio sequence)."""
    return round((((i * 0.6180339887) % 1.0) * 2 - 1) * spread, 1)
