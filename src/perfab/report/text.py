"""Stage 6: the plain-text report, in the shape kernel mailing lists use.

Per workload a table ``Metric  Baseline  Experiment  Delta  Sig`` between
dashed rules, thousands separators, signed percent deltas, direction notes
and a legend; a SETUP block above; environment differences, failed and
excluded runs and warnings below, never hidden.  With three or more
variants the table shows each side as a percentage of the baseline (=
100.00%) with a verdict per cell, in slices of as many variants as fit.
Everything fits 80 columns.

Under each table the key and the notes that change a verdict are shown,
ranked; the notes that change none (the tests, the detectable effect...)
are folded into one line, and repeated warnings of one kind are counted
after the first few (``perfab.report.notes``).  ``verbose`` prints every
note and warning.
"""

from __future__ import annotations

from dataclasses import replace

from perfab.analyse.compare import Analysis, Row
from perfab.analyse.methods import ABSOLUTE
from perfab.report.document import Report, Section, document, mark, profile_kind, variance_note, variance_rows
from perfab.report.lines import WIDTH, clip as _clip, wrap as _wrap, wrap_all
from perfab.report.notes import KEY, collapsed, fold_line, shown
from perfab.report.numbers import centers, fmt_delta, fmt_value
from perfab.report.sweep import sweep_tables
from perfab.terminal import CONTROL as _CONTROL
from perfab.terminal import visible as _visible
from perfab.units import fmt_pct

_SIDE_NAME_MAX = 20  # longer side names are clipped in the normalized table's header


def render_text(doc: Report, absolute: bool = False, verbose: bool = False) -> str:
    """The report for a terminal or a mailing list; ``absolute``: values, not % of the baseline, in 3+ sides;
    ``verbose``: every note and warning, none folded."""
    doc = _visible_document(doc)
    a = doc.analysis
    out: list[str] = [f"perfab: {a.experiment}", ""]
    out += wrap_all(("SETUP", *doc.setup), "    ")
    out += _env_differences(a)
    for section in doc.sections:
        out += _section(a, section, absolute, verbose)
    for t in doc.sizes:
        out += ["", f"SIZE: {t.side}'s vmlinux against {t.against}'s", "", f"    {t.command}", "", *t.lines]
    if a.warnings:
        texts = [w.text for w in a.warnings] if verbose else collapsed(a.warnings)
        out += ["", "WARNINGS"] + [line for w in texts for line in _wrap(f"- {w}")]
    if a.notes:
        out += ["", "NOTES"] + [line for n in a.notes for line in _wrap(f"- {n}")]
    return _visible("\n".join(out).rstrip() + "\n")


def _section(a: Analysis, section: Section, absolute: bool, verbose: bool) -> list[str]:
    """One workload: its heading and command, its table and legend, its problems and profiles."""
    info, rows = section.info, list(section.rows)
    out = ["", info.name.upper(), "", f"    {_clip(info.command, WIDTH - 4)}", ""]
    if not section.compared:
        out += ["No comparison: a side has no usable runs of this workload (reasons below)."]
    elif info.params or not a.variants:
        out += sweep_tables(a, info, rows)
    else:
        out += (_table(a, rows) if len(a.variants) == 1 else _normalized_table(a, rows, absolute))
    return out + (_all_notes(section) if verbose else _ranked_notes(section)) + _variance(a, section) + \
        _profile(a, info.name)


def _all_notes(section: Section) -> list[str]:
    """The legend under the table, then the problems, every one of them."""
    legend = wrap_all(section.legend) if section.compared else []
    return legend + (["", *wrap_all(section.problems)] if section.problems else [])


def _ranked_notes(section: Section) -> list[str]:
    """The key under the table, the notes that change a verdict by rank, the rest as one line."""
    notes = shown(section.notes)
    key = [n.text for n in notes if n.rank == KEY]
    ranked = [n.text for n in notes if n.rank != KEY]
    folded = fold_line(section.notes, WIDTH)
    out = wrap_all(key)
    if ranked:
        out += ["", *wrap_all(ranked)]
    return out + ([folded] if folded else [])


def _visible_document(doc: Report) -> Report:
    """Labels and commands with their control characters shown as \\xNN before the columns are laid out."""
    a = doc.analysis
    if not any(_CONTROL.search(r.label) for r in a.rows) and not any(_CONTROL.search(w.command) for w in a.workloads):
        return doc
    return document(replace(a, rows=tuple(replace(r, label=_visible(r.label)) for r in a.rows),
                            workloads=tuple(replace(w, command=_visible(w.command)) for w in a.workloads)))


def _env_differences(a: Analysis) -> list[str]:
    if not a.env_differences:
        return []
    lines = ["", "ENVIRONMENT DIFFERS BETWEEN SIDES"]
    for variant, key, base, other in a.env_differences:
        lines.append(_clip(f"  {key}: {base} ({a.baseline}) vs {other} ({variant})", WIDTH))
    return lines


def _table(a: Analysis, rows: list[Row]) -> list[str]:
    label_w = min(28, max([len(r.label) for r in rows] + [10]))
    cells = [(_clip(r.label, label_w), *(fmt_value(r, c) for c in centers(r)), fmt_delta(r), _sig(r)) for r in rows]
    vw = max([len(c[1]) for c in cells] + [len(c[2]) for c in cells] + [10])
    header = f"{'Metric':<{label_w}}  {'Baseline':>{vw}}  {'Experiment':>{vw}}  {'Delta':>8}  Sig"
    rule = "-" * min(WIDTH, len(header) + 3)
    body = [f"{c[0]:<{label_w}}  {c[1]:>{vw}}  {c[2]:>{vw}}  {c[3]:>8}  {c[4]}" for c in cells]
    return [header, rule, *body, rule]


def _normalized_table(a: Analysis, rows: list[Row], absolute: bool = False) -> list[str]:
    """Sides as % of the baseline (or as values, ``absolute``); variants that do not fit 80 columns go to
    further slices of the table."""
    label_w = min(24, max([len(r.label) for r in rows] + [10]))
    widest = max([len(v) for r in rows for v in (fmt_value(r, c) for c in centers(r))] + [0]) if absolute else 0
    col = min(_SIDE_NAME_MAX, max(10, widest, *(len(s) for s in (a.baseline, *a.variants)))) + 1
    per_slice = max(1, (WIDTH - label_w - (col + 7)) // (col + 7))  # a side's column: 2 + col + 5
    out: list[str] = []
    for i in range(0, len(a.variants), per_slice):
        out += ([""] if out else []) + _normalized_slice(a, rows, a.variants[i:i + per_slice], label_w, col,
                                                         absolute)
    return out


def _normalized_slice(a: Analysis, rows: list[Row], variants, label_w: int, col: int,
                      absolute: bool = False) -> list[str]:
    header = f"{'Metric':<{label_w}}" + "".join(f"  {_clip(s, col):>{col}}     " for s in (a.baseline, *variants))
    rule = "-" * min(WIDTH, len(header.rstrip()))
    body = []
    metrics = list(dict.fromkeys(r.metric for r in rows))
    for metric in metrics:
        per = {r.variant: r for r in rows if r.metric == metric}
        first = next(iter(per.values()))
        no_ratio = first.estimate is not None and first.estimate.basis == ABSOLUTE
        base = fmt_value(first, centers(first)[0]) if absolute or no_ratio else "100.00%"
        line = f"{_clip(first.label, label_w):<{label_w}}  {base:>{col}}     "
        for v in variants:
            r = per.get(v)
            if absolute:
                pct = "-" if r is None else fmt_value(r, centers(r)[1])
            else:
                pct = "-" if r is None or r.estimate is None else \
                    fmt_delta(r) if r.estimate.delta is None else f"{100 * (1 + r.estimate.delta):.2f}%"
            line += f"  {pct:>{col}} {_sig(r) if r else '':<4}"
        body.append(line.rstrip())
    return [header.rstrip(), rule, *body, rule]


def _variance(a: Analysis, section: Section) -> list[str]:
    """The variance of each level of the rows judged on one mean per unit (a boot): between units, within a unit,
    and the level to add to for a narrower interval."""
    rows = variance_rows(section.rows)
    if not rows:
        return []
    unit = rows[0].levels.unit
    label_w = min(28, max([len(r.label) for r in rows] + [10]))
    between, within = f"between {unit}s", f"within a {unit}"
    header = f"{'Metric':<{label_w}}  {between:>14}  {within:>14}  narrower with"
    rule = "-" * min(WIDTH, len(header))
    body = []
    for r in rows:
        add = f"more {unit}s" if r.levels.add_to() == unit else f"runs per {unit}"
        name = _clip(r.label, label_w) + (f" [{r.variant}]" if len(a.variants) > 1 else "")
        body.append(f"{name:<{label_w}}  {_sd(r.levels.between):>14}  {_sd(r.levels.within):>14}  {add}")
    note = variance_note(a, rows)
    return ["", f"VARIANCE: the {unit} is the unit", "", header, rule, *body, rule, *(_wrap(note) if note else [])]


def _sd(value: float | None) -> str:
    return "-" if value is None else f"+-{fmt_pct(value)}"


def _profile(a: Analysis, workload: str) -> list[str]:
    from perfab.profile import format_profile_rows

    lines = []
    for variant in a.variants:
        rows = a.profiles.get((workload, variant))
        if rows is None:
            continue
        lines += ["", f"PROFILE: {profile_kind(a)} ({a.baseline} -> {variant}; * = significant)", ""]
        lines += format_profile_rows(rows, limit=20).rstrip().splitlines()
    return lines


def _sig(r: Row | None) -> str:
    return "" if r is None else mark(r)
