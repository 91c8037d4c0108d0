"""Sweep tables: one row per point of a parameter grid, per metric, in 80 columns.

With two or more sides each point shows the baseline's and the side's
medians, the Delta and the verdict (each point is its own comparison; FDR
runs across all rows of the report).  With a single side (a scaling curve)
each point shows the median, its distribution-free interval and the
number of runs.  Rates in a thread sweep get a per-thread block, as
will-it-scale prints ``per_thread_ops``.
"""

from __future__ import annotations

import math

from perfab.analyse.compare import Analysis, Row, WorkloadInfo
from perfab.analyse.summary import Summary
from perfab.metrics import Metric, resolve
from perfab.report.document import mark
from perfab.report.numbers import fmt_delta, fmt_value


def sweep_tables(a: Analysis, info: WorkloadInfo, rows: list[Row]) -> list[str]:
    summaries = [s for s in a.summaries if s.workload == info.name]
    metrics = list(dict.fromkeys([r.metric for r in rows] + [s.metric for s in summaries]))
    out: list[str] = []
    for metric in metrics:
        mrows = [r for r in rows if r.metric == metric]
        msums = [s for s in summaries if s.metric == metric]
        out += ["", _title(a.metrics.get((info.name, metric)) or resolve(metric))]
        if a.variants:
            for variant in a.variants:
                out += _compared(a, variant, [r for r in mrows if r.variant == variant], msums)
        else:
            out += _curve(msums, info)
        out += _per_thread(a, msums)
    return out


def _title(metric: Metric) -> str:
    """The metric's label and, when it has one, its direction as the analysis judged it."""
    return f"{metric.label} ({metric.direction} = better)" if metric.direction else metric.label


def _point(params) -> str:
    return " ".join(f"{k}={v}" for k, v in params) or "-"


def _compared(a: Analysis, variant: str, rows: list[Row], sums: list[Summary]) -> list[str]:
    by_point = {(s.params, s.variant): s for s in sums}
    cells = []
    for r in rows:
        base, exp = by_point.get((r.params, a.baseline)), by_point.get((r.params, variant))
        cells.append((_point(r.params), _value(r, base), _value(r, exp), fmt_delta(r), mark(r)))
    pw = max([len(c[0]) for c in cells] + [5])
    vw = max([len(c[1]) for c in cells] + [len(c[2]) for c in cells] + [len(a.baseline), len(variant), 10])
    header = f"{'Point':<{pw}}  {a.baseline[:vw]:>{vw}}  {variant[:vw]:>{vw}}  {'Delta':>8}  Sig"
    rule = "-" * min(80, len(header) + 3)
    return [header, rule, *(f"{c[0]:<{pw}}  {c[1]:>{vw}}  {c[2]:>{vw}}  {c[3]:>8}  {c[4]}" for c in cells), rule]


def _value(r: Row, s: Summary | None) -> str:
    return "-" if s is None else fmt_value(r, s.median)


def _curve(sums: list[Summary], info: WorkloadInfo) -> list[str]:
    cells = [(_point(s.params), _fmt(s.median, sums), _interval(s, sums), str(s.n)) for s in sums]
    pw = max([len(c[0]) for c in cells] + [5])
    vw = max([len(c[1]) for c in cells] + [6])
    iw = max([len(c[2]) for c in cells] + [12])
    header = f"{'Point':<{pw}}  {'Median':>{vw}}  {'95% interval':<{iw}}  {'n':>4}"
    rule = "-" * min(80, len(header))
    return [header, rule, *(f"{c[0]:<{pw}}  {c[1]:>{vw}}  {c[2]:<{iw}}  {c[3]:>4}" for c in cells), rule]


def _interval(s: Summary, sums: list[Summary]) -> str:
    if not math.isfinite(s.lo) or not math.isfinite(s.hi):
        return "(too few runs)"
    return f"{_fmt(s.lo, sums)} .. {_fmt(s.hi, sums)}"


def _fmt(value: float, sums: list[Summary]) -> str:
    integral = all(float(x.median).is_integer() for x in sums)
    mag = abs(value)
    if integral or mag >= 1e5:
        return f"{value:,.0f}"
    if mag == 0:
        return "0"
    decimals = max(0, min(4, 4 - int(math.floor(math.log10(mag)))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _per_thread(a: Analysis, sums: list[Summary]) -> list[str]:
    per = [s for s in sums if s.per_thread is not None]
    if not per:
        return []
    sides = [a.baseline, *a.variants]
    points = list(dict.fromkeys(s.params for s in per))
    table = {(s.params, s.variant): s.per_thread for s in per}
    pw = max([len(_point(p)) for p in points] + [5])
    lines = ["per thread (median / threads):",
             f"{'Point':<{pw}}" + "".join(f"  {v[:12]:>12}" for v in sides)]
    for p in points:
        lines.append(f"{_point(p):<{pw}}" + "".join(
            f"  {(f'{table[(p, v)]:,.0f}' if (p, v) in table else '-'):>12}" for v in sides))
    return lines
