"""Several databases side by side: the same experiment measured on two machines or two days.

Each database gets its own full report; the text format then lines up the
deltas and verdicts of rows present in every database (same workload,
sweep point, metric and side), so a maintainer sees at a glance whether
two machines agree.
"""

from __future__ import annotations

import csv
import io
import json

from perfab.analyse.compare import Analysis
from perfab.report.document import mark
from perfab.report.numbers import fmt_delta

WIDTH = 80


def render_across(named: list[tuple[str, Analysis]], fmt: str, render) -> str:
    """The reports of several (label, analysis) pairs in one output of format ``fmt``."""
    if fmt == "json":
        return json.dumps({"databases": [{"database": label, "report": json.loads(render(a, "json"))}
                                         for label, a in named]}, indent=2, allow_nan=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = None
        for label, a in named:
            for row in csv.DictReader(io.StringIO(render(a, "csv"))):
                if writer is None:
                    writer = csv.DictWriter(out, fieldnames=["database", *row], lineterminator="\n")
                    writer.writeheader()
                writer.writerow({"database": label, **row})
        return out.getvalue()
    heading = "## " if fmt == "markdown" else "=== "
    parts = [f"{heading}{label}\n\n{render(a, fmt)}" for label, a in named]
    if fmt == "text":
        parts.append(side_by_side(named))
    return "\n".join(parts)


def side_by_side(named: list[tuple[str, Analysis]]) -> str:
    """Rows found in every database, their Delta and verdict per database."""
    keys = None
    for _, a in named:
        found = {(r.workload, r.params, r.metric, r.variant) for r in a.rows if r.estimate is not None}
        keys = found if keys is None else keys & found
    first = named[0][1]
    ordered = [r for r in first.rows if (r.workload, r.params, r.metric, r.variant) in (keys or set())]
    col = max(14, *(min(20, len(label)) for label, _ in named))
    label_w = min(28, max([len(_label(r)) for r in ordered] + [10]))
    lines = ["SIDE BY SIDE", "", f"{'Metric':<{label_w}}" + "".join(f"  {label[-col:]:>{col}}" for label, _ in named)]
    lines.append("-" * min(WIDTH, len(lines[-1])))
    for r in ordered:
        cells = []
        for _, a in named:
            other = next(x for x in a.rows if (x.workload, x.params, x.metric, x.variant) ==
                         (r.workload, r.params, r.metric, r.variant))
            cells.append(f"{fmt_delta(other)} {mark(other)}")
        lines.append(f"{_label(r)[:label_w]:<{label_w}}" + "".join(f"  {c:>{col}}" for c in cells))
    if not ordered:
        lines.append("(no row is present in every database)")
    return "\n".join(lines) + "\n"


def _label(r) -> str:
    point = "".join(f" {k}={v}" for k, v in r.params)
    return f"{r.label}{point} [{r.variant}]"
