"""Number formatting shared by the report formats."""

from __future__ import annotations

import math
import statistics

import numpy as np

from perfab.analyse.compare import Row
from perfab.analyse.methods import ABSOLUTE


def fmt_value(row: Row, value: float | None) -> str:
    """A center value: thousands separators for counts, G for very large, ~5 significant digits otherwise."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    values = row.base_values + row.exp_values
    return fmt_number(value, _whole(values) if values else float(value).is_integer())


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


def centers(row: Row) -> tuple[float | None, float | None]:
    """The medians shown for a row: the estimate's, or the raw samples' for rows without one (checks)."""
    if row.estimate is not None:
        return row.estimate.median_base, row.estimate.median_exp
    median = lambda v: float(statistics.median(v)) if v else None  # noqa: E731
    return median(row.base_values), median(row.exp_values)


def fmt_delta(row: Row) -> str:
    """``+1.23%``; ``x11.4`` for ten times or more; the signed change in the metric's unit (no %) when the
    baseline's median is 0 and no ratio exists."""
    est = row.estimate
    if est is None:
        return "-"
    if est.delta is None:
        if est.basis == ABSOLUTE and est.shift is not None and math.isfinite(est.shift):
            text = fmt_value(row, est.shift)
            return text if text.startswith("-") else "+" + text
        return "-"
    return fmt_rel(est.delta)


fmt_change = fmt_delta


def measured_rows(rows: list[Row]) -> list[Row]:
    """Rows tested for a shift, leaving out small counts (context switches) whose CV says little."""
    return [r for r in rows if r.estimate is not None and not r.estimate.traits.counted
            and not (_whole(r.base_values) and r.estimate.median_base < 100)]


def _whole(values: tuple[float, ...]) -> bool:
    """``all(float(v).is_integer() for v in values)``, in one pass over an array."""
    x = np.array(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(x) & (np.floor(x) == x)))


def noise_range(rows: list[Row]) -> str:
    """`` (+-0.10..0.36%)``: the range of per-run noise (robust CV) over the measured rows."""
    cvs = [c for r in measured_rows(rows) for c in (r.cv_base, r.cv_exp) if c is not None]
    if not cvs:
        return ""
    lo, hi = 100 * min(cvs), 100 * max(cvs)
    return f" (+-{lo:.2f}%)" if f"{lo:.2f}" == f"{hi:.2f}" else f" (+-{lo:.2f}..{hi:.2f}%)"
