"""Machine-readable and markdown renderings of the report document.

JSON and CSV carry one unit per column: ``delta``, ``ci_lo`` and ``ci_hi``
are fractions (0.01 = +1%, null where no ratio exists); ``shift``,
``shift_lo`` and ``shift_hi`` are in the metric's unit; ``basis`` says
which of them the verdict used (``ratio``, ``shift/median`` or
``absolute``).  Sweep parameters are a ``params`` map in JSON and one
column each in CSV.  The JSON carries its ``format_version``; every field
is documented in ``docs/report-json.md`` (``perfab.report.schema``).
JSON gives a verdict as its ``Verdict`` value (a check row's failed runs
in ``invalid_runs``) and each diagnostic as ``{kind, text, data}``; CSV
keeps the printed mark (``INVALID (2 runs)``) and carries no diagnostics
but the layout check's mark, a ``layout`` column (``layout-sensitive``).
Text from workloads and specs is escaped: markdown cells cannot break the
table, CSV cells cannot become spreadsheet formulas.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

from perfab.analyse.compare import Row
from perfab.analyse.diagnostics import Diagnostic
from perfab.analyse.verdicts import Verdict
from perfab.report.document import Report, booted_kernels, mark
from perfab.report.numbers import centers, fmt_delta, fmt_value, noise_range

_MD_SPECIAL = re.compile(r"([\\`*_<>\[\]|#])")


def md(text: object) -> str:
    """Text safe in a markdown table cell or list item: markup characters escaped, on one line."""
    flat = " ".join(str(text).replace("\r", "\n").split("\n"))
    return _MD_SPECIAL.sub(r"\\\1", flat)


def md_code(text: object) -> str:
    """Inline code on one line, fenced with more backticks than any run inside it."""
    body = " ".join(str(text).replace("\r", "\n").split("\n"))
    run = max((len(x) for x in re.findall(r"`+", body)), default=0)
    fence = "`" * (run + 1)
    return f"{fence} {body} {fence}" if run else f"`{body}`"


def render_markdown(doc: Report) -> str:
    """The report as a markdown section: one table per workload, every side against the baseline."""
    a = doc.analysis
    out = [f"## perfab: {md(a.experiment)}", ""]
    sides = [a.baseline, *a.variants]
    out.append(f"Baseline **{md(a.baseline)}**; experiment **{', '.join(md(v) for v in a.variants)}**; runs per side: "
               + ", ".join(f"{md(v)} {a.runs_per_side.get(v, 0)}" for v in sides) + ".")
    if a.env_differences:
        out += ["", "Environment differs between sides:", ""]
        out += [f"- {md_code(key)}: {md(base)} ({md(a.baseline)}) vs {md(other)} ({md(variant)})"
                for variant, key, base, other in a.env_differences]
    for info in a.workloads:
        rows = [r for r in a.rows if r.workload == info.name]  # every row, those not compared too
        out += ["", f"### {md(info.name)}", "", md_code(info.command), ""]
        point = "| Point " if info.params else ""
        out += [f"| Metric {point}| Variant | Baseline | Experiment | Delta | Sig |",
                "|---|" + ("---|" if info.params else "") + "---|---:|---:|---:|---|"]
        for r in rows:
            base, exp = (fmt_value(r, c) for c in centers(r))
            cell = f"| {md(_point(r))} " if info.params else ""
            out.append(f"| {md(r.label)} {cell}| {md(r.variant)} | {base} | {exp} | {fmt_delta(r)} | {md(mark(r))} |")
        out += ["", f"`{Verdict.CHANGE}` = beyond per-run noise{noise_range(rows)}, {Verdict.NS} = within noise, "
                f"{Verdict.FLAT} = within the margin."]
        for r in rows:
            out += [f"- {md(r.label)} \\[{md(r.variant)}\\]: {md(d.text)}" for d in r.warnings]
        if info.hidden:
            out.append(f"- {len(info.hidden)} parser metric(s) without a declared direction not shown "
                       f"({md(', '.join(info.hidden))}); `--all` shows them")
    for t in doc.sizes:
        out += ["", f"### size: {md(t.side)}'s vmlinux against {md(t.against)}'s", "", md_code(t.command), "",
                "```", *t.lines, "```"]
    if a.warnings:
        out += ["", "Warnings:", ""] + [f"- {md(w.text)}" for w in a.warnings]
    return "\n".join(out) + "\n"


def _point(r: Row) -> str:
    return " ".join(f"{k}={v}" for k, v in r.params)


def render_json(report: Report) -> str:
    """The report as one JSON object, in format ``report.format_version`` (``docs/report-json.md``)."""
    a = report.analysis
    doc = {
        "format_version": report.format_version,
        "experiment": a.experiment, "baseline": a.baseline, "variants": list(a.variants),
        "alpha": a.alpha, "confidence": a.confidence, "fdr": a.fdr, "backend": a.backend,
        "groups": [list(g) for g in a.groups], "runs_per_side": a.runs_per_side, "order": a.order,
        "sessions": a.sessions, "environment": a.environment, "sources": a.sources,
        "kernels": {side: _kernel(k) for side, k in booted_kernels(a).items()},
        "replication": a.replication,
        "env_differences": [dict(variant=v, key=k, baseline=b, other=o) for v, k, b, o in a.env_differences],
        "warnings": [_diagnostic(w) for w in a.warnings], "notes": list(a.notes),
        "workloads": [dict(name=w.name, command=w.command, failed=w.failed,
                           excluded={f"{metric}: {reason}": n for (metric, reason), n in w.excluded.items()},
                           hidden=list(w.hidden), params=list(w.params)) for w in a.workloads],
        "rows": [_row_dict(r) for r in a.rows],
        "summaries": [dict(workload=x.workload, params=dict(x.params), variant=x.variant, metric=x.metric, n=x.n,
                           median=_num(x.median), lo=_num(x.lo), hi=_num(x.hi), per_thread=_num(x.per_thread))
                      for x in a.summaries],
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _kernel(k: dict) -> dict:
    """A booted kernel as ``kernels`` carries it: exactly the schema's keys."""
    return {key: k.get(key) for key in ("image", "sha256", "release", "cmdline", "config_sha256", "label")}


def _row_dict(r: Row) -> dict:
    e = r.estimate
    base_c, exp_c = centers(r)
    return {
        "workload": r.workload, "params": dict(r.params), "metric": r.metric, "label": r.label,
        "variant": r.variant, "source": r.source, "unit": r.unit, "higher_is_better": r.higher_is_better,
        "primary": r.primary, "margin": r.margin, "verdict": Verdict(r.verdict).value,
        "invalid_runs": r.invalid_runs if r.verdict == Verdict.INVALID else None, "regressed": r.regressed,
        "method": e.method if e else None, "basis": e.basis if e else None,
        "median_base": _num(base_c), "median_exp": _num(exp_c),
        "mean_base": _num(e.mean_base) if e else None, "mean_exp": _num(e.mean_exp) if e else None,
        "delta": _num(e.delta) if e else None, "ci_lo": _num(e.lo) if e else None,
        "ci_hi": _num(e.hi) if e else None, "shift": _num(e.shift) if e else None,
        "shift_lo": _num(e.shift_lo) if e else None, "shift_hi": _num(e.shift_hi) if e else None,
        "resolution": _num(e.resolution) if e else None, "p": _num(e.p) if e else None, "q": _num(r.q),
        "n_base": r.n_base, "n_exp": r.n_exp, "cv_base": _num(r.cv_base), "cv_exp": _num(r.cv_exp),
        "mde": _num(r.mde), "warnings": [_diagnostic(d) for d in r.warnings],
        "base_values": [_num(v) for v in r.base_values], "exp_values": [_num(v) for v in r.exp_values],
        "base_order": list(r.base_order), "exp_order": list(r.exp_order),
        "levels": _levels(r.levels),
    }


def _levels(levels) -> dict | None:
    """A row's units of replication and variance components (``perfab.analyse.units.Levels``), JSON-safe."""
    if levels is None:
        return None
    return {**levels.to_json(), "between": _num(levels.between), "within": _num(levels.within),
            "add": levels.add_to()}


def _diagnostic(d: Diagnostic) -> dict:
    """A diagnostic as JSON: its kind, its sentence and its data (numbers JSON-safe, as every number here)."""
    data = {k: _num(v) if isinstance(v, float) else v for k, v in d.data.items()}
    return {"kind": d.kind.value, "text": d.text, "data": data}


def _num(x: float | None):
    """A JSON-safe number: null for None and nan, "inf"/"-inf" strings for unbounded interval ends."""
    if x is None:
        return None
    x = float(x)
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return None
    return "inf" if x > 0 else "-inf"


CSV_FIELDS = ["workload", "metric", "label", "variant", "source", "unit", "higher_is_better", "verdict", "method",
              "basis", "median_base", "median_exp", "delta", "ci_lo", "ci_hi", "shift", "shift_lo", "shift_hi", "p",
              "q", "n_base", "n_exp", "cv_base", "cv_exp", "mde", "resolution", "layout"]


def render_csv(doc: Report) -> str:
    """One line per row, the JSON row's fields that are single values, sweep parameters one column each."""
    a = doc.analysis
    buf = io.StringIO()
    params = list(dict.fromkeys(k for r in a.rows for k, _ in r.params))
    fields = CSV_FIELDS[:2] + params + CSV_FIELDS[2:]
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in a.rows:
        row = {**_row_dict(r), "verdict": mark(r), **dict(r.params), "layout": _layout(r)}
        w.writerow({k: _cell(v) for k, v in row.items() if k in fields})
    return buf.getvalue()


def _layout(r: Row) -> str:
    """The layout check's mark of a row: ``layout-sensitive``, else empty."""
    from perfab.analyse.layoutcheck import sensitive

    return "layout-sensitive" if sensitive(r) else ""


_NUMBER = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|inf)")  # "-inf": an unbounded interval end


def _cell(value):
    """A CSV cell that a spreadsheet shows as text: leading =, +, -, @ (or tab, CR) of non-numbers quoted off."""
    if not isinstance(value, str) or not value or value[0] not in "=+-@\t\r" or _NUMBER.fullmatch(value):
        return value
    return "'" + value
