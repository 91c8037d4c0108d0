"""The kernel test robot's layout: each side's mean with its relative standard deviation, and ``%change``.

The robot (lkp-tests' comparison emails, such as seed 004's) prints one line
per metric, the base first::

             %stddev     %change         %stddev
                 \\          |                \\
      15278 ±  2%     -13.2%      13261 ±  3%  will-it-scale.per_thread_ops

A side's figure is the mean of its runs and ``± N%`` their sample standard
deviation as a percentage of that mean (left out below 1%, as the robot
does); ``%change`` is the change of the means.  A kernel engineer can lay
perfab's table beside the robot's.  perfab's own verdict, which is not the
robot's (the robot has none: it reports a change above its threshold),
closes each line in brackets, with ``layout-sensitive`` after a ``**`` the
layout check did not confirm; the text report says how it was reached.
Metrics are named ``workload.metric`` and a sweep point follows the name.
"""

from __future__ import annotations

import math
import statistics

from perfab.analyse.layoutcheck import sensitive
from perfab.analyse.model import Row
from perfab.report.document import Report, mark

STDDEV_SHOWN_PCT = 1.0  # the robot leaves out a standard deviation below this
BACKSLASH = "\\"  # the column marks under %stddev


def render_lkp(doc: Report) -> str:
    """The report's rows in the robot's layout, every side beside the baseline."""
    a = doc.analysis
    sides = [a.baseline, *a.variants]
    out = [f"perfab: {a.experiment}", "", "commit:"] + [f"  {side}" for side in sides] + [""]
    out.append("  ".join(f"{side[:16]:>16}" for side in sides))
    out.append("  ".join(["-" * 16] * len(sides)))
    out.append(f"{'%stddev':>16}" + "".join(f"  {'%change':>9}  {'%stddev':>16}" for _ in a.variants))
    out.append(f"{BACKSLASH:>16}" + "".join(f"  {'|':>9}  {BACKSLASH:>16}" for _ in a.variants))
    for key, rows in _by_metric(doc).items():
        line = f"{_figure(rows[0].base_values):>16}"
        for variant in a.variants:
            row = next((r for r in rows if r.variant == variant), None)
            line += f"  {_change(row):>9}  {_figure(row.exp_values) if row else '':>16}"
        marks = " ".join(mark(r) + (" layout-sensitive" if sensitive(r) else "") for r in rows)
        out.append(f"{line}  {key}  [{marks}]")
    return "\n".join(out) + "\n"


def _by_metric(doc: Report) -> dict[str, list[Row]]:
    """The table's rows grouped by ``workload.metric`` (and sweep point), in the report's order."""
    out: dict[str, list[Row]] = {}
    for section in doc.sections:
        for r in section.rows:
            point = "".join(f" {k}={v}" for k, v in r.params)
            out.setdefault(f"{r.workload}.{r.metric}{point}", []).append(r)
    return out


def _mean(values: tuple[float, ...]) -> float:
    """The mean, scaled so that values near the float range's ends do not overflow the sum."""
    scale = max((abs(v) for v in values), default=0.0)
    return statistics.fmean(v / scale for v in values) * scale if scale else 0.0


def _figure(values: tuple[float, ...]) -> str:
    """``15278 ±  2%``: the mean, and the sample standard deviation in percent of it from 1% up."""
    if not values:
        return "-"
    mean = _mean(values)
    scale = max(abs(v) for v in values) or 1.0
    sd = statistics.stdev([v / scale for v in values]) * scale if len(values) > 1 else 0.0
    rel = 100 * sd / abs(mean) if mean else 0.0
    spread = f" ±{rel:3.0f}%" if rel >= STDDEV_SHOWN_PCT and math.isfinite(rel) else " " * 6
    return f"{_number(mean)}{spread}"


def _number(x: float) -> str:
    if not math.isfinite(x) or abs(x) >= 1e15 or (x and abs(x) < 1e-3):
        return f"{x:.4g}"
    if abs(x) >= 1000 or x == int(x):
        return f"{x:.0f}"
    return f"{x:.4g}"


def _change(row: Row | None) -> str:
    """The change of the means in percent, ``-13.2%``; blank without a baseline mean to divide by."""
    if row is None or not row.base_values or not row.exp_values:
        return ""
    base, exp = _mean(row.base_values), _mean(row.exp_values)
    change = 100 * (exp / base - 1) if base else math.nan
    return f"{change:+.1f}%" if math.isfinite(change) else ""
