"""Stage 6: the plain-text report, in the shape kernel mailing lists use.

Per workload a table ``Metric  Baseline  Experiment  Delta  Sig`` between
dashed rules, thousands separators, signed percent deltas, direction notes
and a legend; a SETUP block above; environment differences, failed and
excluded runs and warnings below, never hidden.  With three or more
variants the table shows each side as a percentage of the baseline (=
100.00%) with a verdict per cell, in slices of as many variants as fit.
Everything fits 80 columns.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

from perfab.analyse.compare import Analysis, Row
from perfab.analyse.methods import ABSOLUTE
from perfab.analyse.model import compared
from perfab.plan import describe_order
from perfab.report.numbers import centers, fmt_delta, fmt_pct, fmt_value, measured_rows, noise_range
from perfab.report.sweep import sweep_tables
from perfab.run.backends import declared
from perfab.terminal import CONTROL as _CONTROL
from perfab.terminal import visible as _visible

WIDTH = 80
_SIDE_NAME_MAX = 20  # longer side names are clipped in the normalized table's header


def render_text(a: Analysis, absolute: bool = False) -> str:
    a = _visible_analysis(a)
    out: list[str] = [f"perfab: {a.experiment}", ""]
    out += _setup(a)
    out += _env_differences(a)
    for info in a.workloads:
        rows = [r for r in a.rows if r.workload == info.name and r.verdict != "-"]
        out += ["", info.name.upper(), "", f"    {_clip(info.command, WIDTH - 4)}", ""]
        if not compared(a, info.name):
            out += ["No comparison: a side has no usable runs of this workload (reasons below)."]
        elif info.params or not a.variants:
            out += sweep_tables(a, info, rows) + _legend(a, rows)
        else:
            out += (_table(a, rows) if len(a.variants) == 1 else _normalized_table(a, rows, absolute))
            out += _legend(a, rows)
        out += _problems(info, rows, a.rows)
        out += _profile(a, info.name)
    if a.warnings:
        out += ["", "WARNINGS"] + [line for w in a.warnings for line in _wrap(f"- {w}")]
    if a.notes:
        out += ["", "NOTES"] + [line for n in a.notes for line in _wrap(f"- {n}")]
    return _visible("\n".join(out).rstrip() + "\n")


def _visible_analysis(a: Analysis) -> Analysis:
    """Labels and commands with their control characters shown as \\xNN before the columns are laid out."""
    if not any(_CONTROL.search(r.label) for r in a.rows) and not any(_CONTROL.search(w.command) for w in a.workloads):
        return a
    return replace(a, rows=tuple(replace(r, label=_visible(r.label)) for r in a.rows),
                   workloads=tuple(replace(w, command=_visible(w.command)) for w in a.workloads))


def _setup(a: Analysis) -> list[str]:
    from perfab.machine import describe

    lines = ["SETUP"]
    lines += [f"  {line}" for line in describe(a.environment)]
    runs = ", ".join(f"{v} {a.runs_per_side.get(v, 0)}" for v in (a.baseline, *a.variants))
    if a.variants:
        lines.append(f"  sides    : baseline = {a.baseline}; experiment = {', '.join(a.variants)}")
    else:
        lines.append(f"  side     : {a.baseline} (one side: absolute values, no comparison)")
    lines.append(f"  runs     : {runs} measured ({describe_order(a.spec) if a.spec else a.order})")
    if a.spec is not None and a.spec.sequential is not None:
        seq = a.spec.sequential
        why = a.stop_reason or (a.decision.reason if a.decision is not None else "not run yet")
        lines.append(f"  stopping : runs = \"auto\", {seq.min_runs}..{seq.max_runs} per side; {why}")
    lines.append(f"  counted  : {_counted(a)}")
    for variant, src in a.sources.items():
        if src.get("commit"):
            subject = f' ("{src["subject"]}")' if src.get("subject") else ""
            lines.append(f"  source   : {variant} = {src.get('ref')} {src['commit'][:12]}{subject}")
        if src.get("command"):
            lines.append(f"  built    : {variant}: {' '.join(src['command'])}")
    if a.sessions > 1:
        lines.append(f"  sessions : {a.sessions}")
    return [part for x in lines for part in _wrap(x, "    ")]


def _counted(a: Analysis) -> str:
    """What the backend counted, as it describes itself."""
    return declared(a.backend).describe(a.groups)


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


def _legend(a: Analysis, rows: list[Row]) -> list[str]:
    if not a.variants:
        return _wrap(f"Median of each point's runs with its {fmt_pct(a.confidence, digits=3)} distribution-free interval "
                     "(order statistics of the runs; binomial coverage).")
    lines = _wrap(_directions(rows)) if _directions(rows) else []
    noise = noise_range(rows)
    margins = sorted({r.margin for r in rows if r.estimate is not None})
    margin = "/".join(fmt_pct(m) for m in margins) or "0.1%"
    methods = sorted({r.estimate.method for r in rows if r.estimate is not None})
    if methods == ["exact"]:
        lines += _wrap(f"** = a difference beyond the margin (deterministic counts), flat = within +-{margin}.")
    else:
        lines += _wrap(f"** = beyond per-run noise{noise}, ns = within noise, flat = within +-{margin}.")
    lines += _wrap(_method_note(a, methods, rows))
    if any(r.estimate is not None and r.estimate.basis == ABSOLUTE for r in rows):
        lines += _wrap("Delta without %: the change in the metric's unit, where the baseline's median is 0 "
                       "and no ratio exists.")
    mdes = [r.mde for r in measured_rows(rows) if r.mde is not None and math.isfinite(r.mde)]
    if mdes:
        lines += _wrap(f"Minimum detectable effect at this n and noise (80% power): "
                       f"{100 * min(mdes):.2f}..{100 * max(mdes):.2f}%.")
    return lines


def _directions(rows: list[Row]) -> str:
    """``ops/s: higher = better. Time elapsed/User: lower = better.``"""
    by_dir: dict[bool, list[str]] = {True: [], False: []}
    for r in rows:
        if r.higher_is_better is not None and r.estimate is not None:
            name = _short(r.label)
            if name not in by_dir[r.higher_is_better]:
                by_dir[r.higher_is_better].append(name)
    parts = [f"{'/'.join(names)}: {'higher' if d else 'lower'} = better." for d, names in by_dir.items() if names]
    return " ".join(parts)


def _method_note(a: Analysis, methods: list[str], rows: list[Row] = ()) -> str:
    names = {"nonparametric": (f"Mann-Whitney U; Delta = Hodges-Lehmann ratio, {fmt_pct(a.confidence, digits=3)} intervals "
                               "(not the ratio of the medians shown)"),
             "exact": "exact counts (deterministic; only the margin decides flat)",
             "normal": f"Welch t, {fmt_pct(a.confidence, digits=3)} intervals"}
    if a.spec is not None and a.spec.sequential is not None:
        seq = a.spec.sequential
        names["sequential"] = (f"group-sequential rank test, {seq.spending} error spending over looks after every "
                               f"block ({seq.min_runs}..{seq.max_runs} runs per side); Delta = Hodges-Lehmann "
                               f"ratio, {fmt_pct(a.confidence, digits=3)} repeated intervals valid under monitoring")
        tests = "; ".join(_for_rows(names.get(m, m), m, methods, rows) for m in methods)
        return f"Tests: {tests}; Holm across rows at alpha {a.alpha:g} (primary rows carry 80% of it)."
    fdr = {"bh": "Benjamini-Hochberg FDR", "holm": "Holm FWER"}[a.fdr]
    tests = "; ".join(_for_rows(names[m], m, methods, rows) for m in methods)
    if methods == ["exact"]:
        return f"Method: {tests}."
    tested = [r.primary for r in a.rows if r.estimate is not None and r.estimate.p is not None]
    weighted = " (primary rows carry 80% of it)" if 0 < sum(tested) < len(tested) else ""
    return f"Tests: {tests}; {fdr} at alpha {a.alpha:g} across rows{weighted}."


def _problems(info, rows: list[Row], rows_all: tuple[Row, ...]) -> list[str]:
    lines = []
    for variant, reasons in info.failed.items():
        counts = Counter(reasons)
        detail = "; ".join(f"{n}x {why}" if n > 1 else why for why, n in counts.most_common())
        lines.append(f"Failed runs on {variant}: {len(reasons)} ({detail})")
    labels = {r.metric: _short(r.label) for r in rows_all if r.workload == info.name}
    for what, count in info.excluded.items():
        metric, _, reason = what.partition(": ")
        lines.append(f"Excluded {labels.get(metric, metric)}: {reason} ({count} run{'s' if count != 1 else ''})")
    empty = [r.label for r in rows_all if r.workload == info.name and r.verdict == "-"
             and r.warnings in ((), ("no usable runs on one side",))]
    if empty:
        lines.append(f"Not compared (no usable runs on a side): {', '.join(dict.fromkeys(empty))}")
    if info.simulated:
        lines.append(f"Not shown: {', '.join(info.simulated)}, timed by the workload under valgrind's simulated "
                     "CPU (meaningless as time); --all shows them")
    if info.hidden:
        lines.append(f"Not shown: {len(info.hidden)} parser metric(s) without a declared direction "
                     f"({', '.join(info.hidden)}); --all shows them, or declare them with [[workload.metric]]")
    refused = [r for r in rows_all if r.workload == info.name and r.verdict == "-"
               and r.warnings not in ((), ("no usable runs on one side",))]
    grouped: dict[str, dict[str, None]] = {}  # warning -> labels (a baseline warning comes once per variant)
    for r in [*rows, *refused]:
        for w in r.warnings:
            grouped.setdefault(w, {})[_short(r.label)] = None
    for w, names in grouped.items():
        lines.append(f"{'/'.join(names)}: {w}")
    if not lines:
        return []
    return ["", *[y for x in lines for y in _wrap(x)]]


def _profile(a: Analysis, workload: str) -> list[str]:
    from perfab.profile import format_profile_rows

    lines = []
    for variant in a.variants:
        rows = a.profiles.get((workload, variant))
        if rows is None:
            continue
        lines += ["", f"PROFILE: self time, % of samples ({a.baseline} -> {variant}; * = significant)", ""]
        lines += format_profile_rows(rows, limit=20).rstrip().splitlines()
    return lines


def _sig(r: Row | None) -> str:
    return "" if r is None else r.verdict


def _for_rows(note: str, method: str, methods: list[str], rows: list[Row]) -> str:
    """A method's note naming the rows it judged, when the table mixes methods (a timing table with an exact
    checksum row must not read as if its times were exact counts); the most used method takes "the rest"."""
    if len(methods) < 2 or not rows:
        return note
    counts = {m: sum(1 for r in rows if r.estimate is not None and r.estimate.method == m) for m in methods}
    if method == max(methods, key=lambda m: (counts[m], m == "nonparametric")):
        return f"other rows: {note}"
    labels = []
    for r in rows:
        if r.estimate is not None and r.estimate.method == method and _short(r.label) not in labels:
            labels.append(_short(r.label))
    return f"{'/'.join(labels)}: {note}"


def _short(label: str) -> str:
    """A label as the notes under a table name it: without its unit, and no longer than a line's half."""
    return _clip(label.split(" (")[0], 40)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _wrap(text: str, indent: str = "  ") -> list[str]:
    """Lines of at most 80 columns, broken at spaces, or after a '/' inside a long word (a list of labels)."""
    import textwrap

    if len(text) <= WIDTH:
        return [text]
    lead = text[: len(text) - len(text.lstrip())]
    lines = textwrap.wrap(text.lstrip(), WIDTH, initial_indent=lead, subsequent_indent=indent,
                          break_on_hyphens=False, break_long_words=False) or [""]
    out: list[str] = []
    for line in lines:
        while len(line) > WIDTH and "/" in line[len(indent):WIDTH]:
            cut = line.rindex("/", 0, WIDTH) + 1
            out.append(line[:cut])
            line = indent + line[cut:]
        out.append(line)
    return out
