"""One experiment's analysis as a page: the table first, then every metric's plots.

Per workload, top to bottom: the command, the verdict table (each label a
link to its metric's plots), the legend and the problems of the text
report, plots across sweep points, the user/kernel split of ``:u``/``:k``
counter pairs, one section per metric (and sweep point) with the runs, the
delta and the run order, and the profile.  SETUP comes first, the
experiment's warnings and notes last, as in the text report.
"""

from __future__ import annotations

import math

from perfab.analyse.compare import Analysis, Row, WorkloadInfo
from perfab.analyse.summary import Summary
from perfab.metrics import resolve
from perfab.profile import ProfileRows
from perfab.report.document import Report, Section, mark, profile_kind
from perfab.report.html import table
from perfab.report.html.page import document
from perfab.report.html.plots import delta_plot, order_plot, runs_plot
from perfab.report.html.svg import esc
from perfab.report.notes import collapsed
from perfab.report.html.sweep import profile_plot, split_plot, sweep_plot, x_parameter
from perfab.report.numbers import centers, fmt_delta, fmt_value

PROFILE_ROWS = 20  # symbols listed per profile, as in the text report


def render_html(doc: Report) -> str:
    """The whole report document as one self-contained HTML page."""
    a = doc.analysis
    parts = [f"<h1>perfab: {esc(a.experiment)}</h1>", _lead(a), _nav(a), "<h2 id=\"setup\">Setup</h2>",
             table.setup(doc), table.env_differences(a)]
    for wi, section in enumerate(doc.sections):
        parts.append(_workload(a, wi, section))
    if a.warnings:
        warnings = collapsed(a.warnings, lists="--format json lists them")  # the page stays small at any size
        parts += ['<h2 id="warnings">Warnings</h2>', table.bullet_list(warnings)]
    if a.notes:
        parts += ['<h2 id="notes">Notes</h2>', table.bullet_list(a.notes, "notes")]
    parts.append("<footer>perfab report: static page, no scripts, nothing fetched.</footer>")
    return document(f"perfab: {a.experiment}", "\n".join(p for p in parts if p))


def _lead(a: Analysis) -> str:
    runs = ", ".join(f"{esc(v)} {a.runs_per_side.get(v, 0)}" for v in (a.baseline, *a.variants))
    return (f'<p class="lead">Baseline <b>{esc(a.baseline)}</b>; experiment '
            f'<b>{", ".join(esc(v) for v in a.variants)}</b>; measured runs: {runs}.</p>')


def _nav(a: Analysis) -> str:
    links = ['<a href="#setup">Setup</a>'] + [f'<a href="#w{i}">{esc(w.name)}</a>' for i, w in enumerate(a.workloads)]
    links += ['<a href="#warnings">Warnings</a>'] if a.warnings else []
    links += ['<a href="#notes">Notes</a>'] if a.notes else []
    return "<nav>" + "".join(links) + "</nav>"


def _groups(rows: list[Row]) -> dict[tuple, list[Row]]:
    """(sweep point, metric) -> one row per variant, in report order."""
    out: dict[tuple, list[Row]] = {}
    for r in rows:
        out.setdefault((r.params, r.metric), []).append(r)
    return out


def _workload(a: Analysis, wi: int, section: Section) -> str:
    info, rows = section.info, list(section.rows)
    groups = _groups(rows)
    points = list(dict.fromkeys(p for p, _ in groups))
    metrics = list(dict.fromkeys(m for _, m in groups))
    anchors = {key: f"w{wi}-p{points.index(key[0])}-m{metrics.index(key[1])}" for key in groups}
    parts = [f'<section class="workload" id="w{wi}"><h2>{esc(info.name)}</h2>',
             f'<pre class="command">{esc(info.command)}</pre>',
             table.verdict_table(a, rows, anchors, bool(info.params)), table.legend(section),
             table.problems(section)]
    if info.params:
        parts.append(_sweeps(a, info, groups))
    parts.append(_splits(a, groups, anchors))
    parts += [_metric(a, key, group, anchors[key]) for key, group in groups.items()]
    parts.append(_profiles(a, info.name))
    return "\n".join(p for p in parts if p) + "</section>"


def _metric(a: Analysis, key: tuple, rows: list[Row], anchor: str) -> str:
    point = table.point_text(key[0])
    title = esc(rows[0].label) + (f' <span class="point">{esc(point)}</span>' if point else "")
    plots = [runs_plot(rows, a.baseline), delta_plot(rows, a.confidence), order_plot(rows, a.baseline)]
    check = ""
    if all(r.estimate is None for r in rows):
        check = f"<p class=\"muted\">Check metric, not compared: {', '.join(esc(mark(r)) for r in rows)}.</p>"
    warnings = list(dict.fromkeys(f"{r.variant}: {d.text}" if len(rows) > 1 else d.text
                                  for r in rows for d in r.warnings))
    return (f'<section class="metric" id="{anchor}"><h3>{title}</h3>{check}<div class="plots">{"".join(plots)}</div>'
            f"{table.bullet_list(warnings)}</section>")


def _sweeps(a: Analysis, info: WorkloadInfo, groups: dict) -> str:
    """Per metric, one plot against the sweep parameter for each combination of the other parameters: each
    side's median and interval as the analysis summarised them, each variant's delta as it compared them."""
    param = x_parameter(info.params)
    sides = [a.baseline, *a.variants]
    summaries: dict[tuple, dict[str, Summary]] = {}
    for s in a.summaries:
        if s.workload == info.name:
            summaries.setdefault((s.metric, s.params), {})[s.variant] = s
    out = [f"<h3>Sweep over {esc(param)}</h3>"]
    for metric in dict.fromkeys(m for m, _ in summaries):
        panels: dict[tuple, list] = {}
        for (m, params), by_side in summaries.items():
            rows = groups.get((params, m), [])
            if m == metric and (not a.variants or (rows and rows[0].estimate is not None)):
                rest = tuple((k, v) for k, v in params if k != param)
                panels.setdefault(rest, []).append((dict(params).get(param, ""), by_side, rows))
        meta = a.metrics.get((info.name, metric)) or resolve(metric)
        for rest, points in panels.items():
            if len(points) < 2:
                continue
            points.sort(key=lambda p: _sweep_key(p[0]))
            label = esc(meta.label) + (f' <span class="point">{esc(table.point_text(rest))}</span>' if rest else "")
            plot = sweep_plot(points, sides, param, meta.label, meta.unit, a.confidence)
            out.append(f'<h4>{label}</h4><div class="plots">{plot}</div>')
    return "".join(out) if len(out) > 1 else ""


def _sweep_key(value: str) -> tuple:
    """Numeric sweep values in numeric order, before any others (kept in their order by the stable sort)."""
    try:
        return (0, float(value))
    except ValueError:
        return (1, 0.0)


def _splits(a: Analysis, groups: dict, anchors: dict) -> str:
    """``X:u`` next to ``X:k`` for every counter counted both ways."""
    out = []
    for (params, metric), user in groups.items():
        if not metric.endswith(":u") or (params, metric[:-2] + ":k") not in groups:
            continue
        kernel = groups[(params, metric[:-2] + ":k")]
        point = table.point_text(params)
        out.append(f"<h4>{esc(metric[:-2])}{' ' + esc(point) if point else ''}</h4><div class=\"plots\">"
                   f"{_split_table(a, user, kernel, anchors)}{split_plot(user, kernel, a.baseline)}</div>")
    return ("<h3>User and kernel counts</h3>" + "".join(out)) if out else ""


def _split_table(a: Analysis, user: list[Row], kernel: list[Row], anchors: dict) -> str:
    head = "<tr><th></th>" + "".join(f'<th class="num">{what}</th>' for what in ("user (:u)", "kernel (:k)")) + "</tr>"
    body = []
    for side_rows, name in ((None, a.baseline), *((i, v) for i, v in enumerate(a.variants))):
        cells = []
        for rows in (user, kernel):
            r = rows[0] if side_rows is None else rows[side_rows]
            value = centers(r)[0 if side_rows is None else 1]
            change = "" if side_rows is None else f" ({fmt_delta(r)} {esc(mark(r))})"
            link = f'<a href="#{anchors[(r.params, r.metric)]}">{fmt_value(r, value)}</a>'
            cells.append(f'<td class="num">{link}{change}</td>')
        body.append(f"<tr><td>{esc(name)}</td>{''.join(cells)}</tr>")
    return f'<table class="split"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _profiles(a: Analysis, workload: str) -> str:
    out = []
    for variant in a.variants:
        rows: ProfileRows | None = a.profiles.get((workload, variant))
        if rows is None:
            continue
        out.append(f"<h3>Profile: {esc(profile_kind(a))} ({esc(a.baseline)} \u2192 {esc(variant)})</h3>")
        out.append(f'<div class="plots">{profile_plot(rows, a.baseline, variant)}</div>')
        out.append(_profile_table(rows, a.baseline, variant))
    return "".join(out)


def _profile_table(rows: ProfileRows, baseline: str, variant: str) -> str:
    head = (f"<tr><th>Symbol</th><th class=\"num\">{esc(baseline)} %</th><th class=\"num\">\u00b1%</th>"
            f"<th class=\"num\">change pp</th><th class=\"num\">{esc(variant)} %</th><th class=\"num\">\u00b1%</th>"
            "<th>Sig</th></tr>")
    body = "".join(
        f"<tr><td><code>{esc(r.symbol)}</code></td><td class=\"num\">{r.base_mean:.2f}</td>"
        f"<td class=\"num\">{_rsd(r.base_rsd_pct)}</td><td class=\"num\">{r.delta_pp:+.1f}</td>"
        f"<td class=\"num\">{r.exp_mean:.2f}</td><td class=\"num\">{_rsd(r.exp_rsd_pct)}</td>"
        f"<td class=\"sig\">{'*' if r.significant else ''}</td></tr>" for r in rows[:PROFILE_ROWS])
    notes = list(getattr(rows, "warnings", ()))
    cut = len(rows) - min(PROFILE_ROWS, len(rows))
    if isinstance(rows, ProfileRows):
        notes.append(f"* significant: {rows.method}, alpha {rows.alpha:g}; rows cut: {cut} past {PROFILE_ROWS}, "
                     f"{rows.dropped} under {rows.min_share:g}% on both sides")
    return f'<table class="profile"><thead>{head}</thead><tbody>{body}</tbody></table>' + \
        table.bullet_list(notes, "notes")


def _rsd(pct: float) -> str:
    """Relative spread in whole percent, truncated as the text report's profile columns print it."""
    return f"{int(pct)}" if math.isfinite(pct) else "-"
