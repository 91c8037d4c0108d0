"""The verdict table and the text report's prose, as HTML.

The table carries the numbers of the text report, formatted by
``perfab.report.numbers`` (medians, deltas) and computed as the text
report computes them (the normalized table's percentages), plus the
interval the verdict rests on; each metric's label links to its plots.
The legend, the per-workload problems and SETUP come from the report
document (``perfab.report.document``), as the text report's do, so both
reports always say the same thing.
"""

from __future__ import annotations

import math

from perfab.analyse.compare import Analysis, Row
from perfab.analyse.methods import ABSOLUTE
from perfab.report.document import Report, Section, mark
from perfab.report.html.plots import verdict_class
from perfab.report.html.svg import esc
from perfab.report.lines import wrap_all
from perfab.report.numbers import centers, fmt_delta, fmt_value
from perfab.units import fmt_pct, fmt_rel


def point_text(params) -> str:
    """``threads=4 size=64``: a sweep point as the markdown report writes it."""
    return " ".join(f"{k}={v}" for k, v in params)


def verdict_table(a: Analysis, rows: list[Row], anchors: dict, sweep: bool) -> str:
    """Two sides: Metric, Baseline, Experiment, Delta, interval, Sig; more: each side as % of the baseline."""
    if len(a.variants) == 1:
        head = ["Metric", *(["Point"] if sweep else []), f"Baseline<br><small>{esc(a.baseline)}</small>",
                f"Experiment<br><small>{esc(a.variants[0])}</small>", "Delta",
                f"{fmt_pct(a.confidence, digits=3)} interval", "Sig"]
        body = [_two_side_row(r, anchors, sweep) for r in rows]
    else:
        head = ["Metric", *(["Point"] if sweep else []), f"{esc(a.baseline)}<br><small>baseline</small>"]
        head += [f"{esc(v)}<br><small>% of baseline</small>" for v in a.variants]
        groups: dict[tuple, list[Row]] = {}
        for r in rows:
            groups.setdefault((r.params, r.metric), []).append(r)
        body = [_normalized_row(a, g, anchors, sweep) for g in groups.values()]
    cells = "".join(f'<th class="{"num" if i > (1 if sweep else 0) else ""}">{h}</th>' for i, h in enumerate(head))
    return f'<table class="verdicts"><thead><tr>{cells}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _label_cell(r: Row, anchors: dict, sweep: bool) -> str:
    anchor = anchors.get((r.params, r.metric))
    label = f'<a href="#{anchor}">{esc(r.label)}</a>' if anchor else esc(r.label)
    return f"<td>{label}</td>" + (f"<td>{esc(point_text(r.params))}</td>" if sweep else "")


def _two_side_row(r: Row, anchors: dict, sweep: bool) -> str:
    base, exp = (fmt_value(r, c) for c in centers(r))
    cls = ' class="primary"' if r.primary else ""
    return (f"<tr{cls}>{_label_cell(r, anchors, sweep)}<td class=\"num\">{base}</td><td class=\"num\">{exp}</td>"
            f"<td class=\"num\">{fmt_delta(r)}</td><td class=\"num\">{interval_text(r)}</td>"
            f"<td class=\"sig {verdict_class(r)}\">{esc(mark(r))}</td></tr>")


def _normalized_row(a: Analysis, group: list[Row], anchors: dict, sweep: bool) -> str:
    """One metric as in the text report's normalized table: the baseline 100.00%, each variant % and verdict."""
    per = {r.variant: r for r in group}
    first = group[0]
    absolute = first.estimate is not None and first.estimate.basis == ABSOLUTE
    base = fmt_value(first, first.estimate.median_base) if absolute else "100.00%"
    cells = [f'<td class="num">{base}</td>']
    for v in a.variants:
        r = per.get(v)
        pct = "-" if r is None or r.estimate is None else \
            fmt_delta(r) if r.estimate.delta is None else f"{100 * (1 + r.estimate.delta):.2f}%"
        sig = f' <span class="sig {verdict_class(r)}">{esc(mark(r))}</span>' if r else ""
        tip = f' title="{esc(interval_text(r))}"' if r else ""
        cells.append(f'<td class="num"{tip}>{pct}{sig}</td>')
    cls = ' class="primary"' if first.primary else ""
    return f"<tr{cls}>{_label_cell(first, anchors, sweep)}{''.join(cells)}</tr>"


def interval_text(r: Row) -> str:
    """The interval the verdict rests on: of the ratio in percent, or of the shift in the metric's unit."""
    e = r.estimate
    if e is None:
        return "-"
    if e.delta is not None and e.lo is not None and e.hi is not None:
        return f"{_pct(e.lo)} .. {_pct(e.hi)}"
    if e.shift_lo is not None and e.shift_hi is not None:
        return f"{_shift(r, e.shift_lo)} .. {_shift(r, e.shift_hi)}"
    return "-"


def _pct(x: float) -> str:
    return fmt_rel(x)  # the report's one format of a relative change, clipped at -100%


def _shift(r: Row, x: float) -> str:
    if not math.isfinite(x):
        return "-inf" if x < 0 else "+inf"
    text = fmt_value(r, x)
    return text if text.startswith("-") else "+" + text


def legend(section: Section) -> str:
    """Directions, the meaning of the verdicts, the tests and the detectable effect, as in the text report."""
    return '<div class="legend">' + "".join(f"<p>{esc(p)}</p>" for p in section.legend) + "</div>"


def problems(section: Section) -> str:
    """Failed and excluded runs, rows not compared, hidden metrics and row diagnostics, as in the text report."""
    return _list(list(section.problems), "problems warnings")


def setup(doc: Report) -> str:
    """The SETUP block, line for line as the text report prints it (wrapped to 80 columns)."""
    lines = wrap_all(doc.setup, "    ")
    shown = "\n".join(line[2:] if line.startswith("  ") else line for line in lines)
    return f'<pre class="setup">{esc(shown)}</pre>'


def env_differences(a: Analysis) -> str:
    if not a.env_differences:
        return ""
    rows = "".join(f"<tr><td><code>{esc(k)}</code></td><td>{esc(b)}</td><td>{esc(o)}</td><td>{esc(v)}</td></tr>"
                   for v, k, b, o in a.env_differences)
    return ('<h2 id="environment">Environment differs between sides</h2><table><thead><tr><th>Setting</th>'
            f"<th>{esc(a.baseline)} (baseline)</th><th>Other side</th><th>Side</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _list(items: list[str], cls: str) -> str:
    if not items:
        return ""
    return f'<ul class="{cls}">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def bullet_list(items, cls: str = "warnings") -> str:
    """Escaped items as a list (empty string for none)."""
    return _list(list(items), cls)
