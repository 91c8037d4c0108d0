"""Number formatting shared by the report formats."""

from __future__ import annotations

import math
import statistics

import numpy as np

from perfab.analyse.compare import Row
from perfab.analyse.methods import ABSOLUTE
from perfab.units import fmt_number, fmt_rel


def fmt_value(row: Row, value: float | None) -> str:
    """A center value: thousands separators for counts, G for very large, ~5 significant digits otherwise."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    values = row.base_values + row.exp_values
    return fmt_number(value, _whole(values) if values else float(value).is_integer())


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
