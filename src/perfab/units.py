"""Numbers as perfab writes them everywhere: counts, shares and relative changes.

The bottom of the package: analysis notes, reports, size tables and the
command line format their numbers here, so a percentage reads the same in a
warning and in a table, and no layer imports a higher one to borrow a format.
"""

from __future__ import annotations

import math


def fmt_number(value: float, integral: bool) -> str:
    """Thousands separators for counts and large values, G beyond 1e10, ``1.7e+308`` beyond 1e15 and below 1e-4,
    about five significant digits otherwise."""
    mag = abs(value)
    if mag >= 1e15 or 0 < mag < 1e-4:  # beyond G, or below the last of four decimals: a power of ten
        return f"{value:.4g}"
    if mag >= 1e10:
        return f"{value / 1e9:,.2f}G"
    if integral or mag >= 1e5:
        return f"{value:,.0f}"
    if mag == 0:
        return "0"
    decimals = max(0, min(4, 4 - int(math.floor(math.log10(mag)))))
    return f"{value:,.{decimals}f}"


def fmt_pct(fraction: float, signed: bool = False, digits: int = 2) -> str:
    """A share or a margin (0.5 = 50%) in percent: ``digits`` significant figures, never scientific notation,
    trailing zeros dropped: ``0.5%``, ``12%``, ``100%``, ``0.0012%``; ``inf%`` when not finite."""
    if not math.isfinite(fraction):
        return ("-" if fraction < 0 else "+" if signed else "") + "inf%"
    value = 100 * fraction
    if value == 0:
        return "+0%" if signed else "0%"
    decimals = min(8, max(0, digits - 1 - math.floor(math.log10(abs(value)))))
    text = f"{value:{'+' if signed else ''},.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + "%"


def fmt_rel(delta: float | None, decimals: int = 2) -> str:
    """A relative change (0.05 = +5%) as the report writes it everywhere: ``+5.00%``; ``x11.4`` from ten times
    the baseline on; never below ``-100.00%`` (a ratio cannot fall further: an interval end beyond is clipped);
    ``+inf``/``-inf``; ``-`` for none."""
    if delta is None:
        return "-"
    if not math.isfinite(delta):
        return "-inf" if delta < 0 else "+inf"
    if delta >= 1e6:
        return f"x{1 + delta:.3g}"
    if delta >= 9:
        return f"x{1 + delta:,.1f}"
    text = f"{100 * max(delta, -1.0):+,.{decimals}f}%"
    return text.replace("-", "+", 1) if float(text[1:-1].replace(",", "")) == 0 else text


def rel_ticks(ticks: list[float]) -> list[str]:
    """Labels for an axis of relative changes, in ``fmt_rel``'s notation, as many decimals as the step needs."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    decimals = max(0, min(2, -math.floor(math.log10(100 * step) + 1e-9))) if step > 0 else 0
    return [fmt_rel(t, decimals) for t in ticks]
