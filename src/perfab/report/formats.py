"""Machine-readable and markdown renderings of an analysis."""

from __future__ import annotations

import csv
import io
import json
import math

from perfab.analyse.compare import Analysis, Row
from perfab.report.numbers import centers, fmt_delta, fmt_value, noise_range


def render_markdown(a: Analysis) -> str:
    out = [f"## perfab: {a.experiment}", ""]
    sides = [a.baseline, *a.variants]
    out.append(f"Baseline **{a.baseline}**; experiment **{', '.join(a.variants)}**; runs per side: "
               + ", ".join(f"{v} {a.runs_per_side.get(v, 0)}" for v in sides) + ".")
    if a.env_differences:
        out += ["", "Environment differs between sides:", ""]
        out += [f"- `{key}`: {base} ({a.baseline}) vs {other} ({variant})"
                for variant, key, base, other in a.env_differences]
    for info in a.workloads:
        rows = [r for r in a.rows if r.workload == info.name]
        out += ["", f"### {info.name}", "", f"`{info.command}`", ""]
        out += ["| Metric | Variant | Baseline | Experiment | Delta | Sig |", "|---|---|---:|---:|---:|---|"]
        for r in rows:
            base, exp = (fmt_value(r, c) for c in centers(r))
            out.append(f"| {r.label} | {r.variant} | {base} | {exp} | {fmt_delta(r)} | {_md(r.verdict)} |")
        out += ["", f"`**` = beyond per-run noise{noise_range(rows)}, ns = within noise, flat = within the margin."]
        for r in rows:
            out += [f"- {r.label} [{r.variant}]: {w}" for w in r.warnings]
    if a.warnings:
        out += ["", "Warnings:", ""] + [f"- {w}" for w in a.warnings]
    return "\n".join(out) + "\n"


def _md(verdict: str) -> str:
    return verdict.replace("*", r"\*")


def render_json(a: Analysis) -> str:
    doc = {
        "experiment": a.experiment, "baseline": a.baseline, "variants": list(a.variants),
        "alpha": a.alpha, "confidence": a.confidence, "fdr": a.fdr, "backend": a.backend,
        "groups": [list(g) for g in a.groups], "runs_per_side": a.runs_per_side, "order": a.order,
        "sessions": a.sessions, "environment": a.environment,
        "env_differences": [dict(variant=v, key=k, baseline=b, other=o) for v, k, b, o in a.env_differences],
        "warnings": list(a.warnings), "notes": list(a.notes),
        "workloads": [dict(name=w.name, command=w.command, failed=w.failed, excluded=w.excluded)
                      for w in a.workloads],
        "rows": [_row_dict(r) for r in a.rows],
    }
    return json.dumps(doc, indent=2, default=_finite) + "\n"


def _row_dict(r: Row) -> dict:
    e = r.estimate
    return {
        "workload": r.workload, "metric": r.metric, "label": r.label, "variant": r.variant, "unit": r.unit,
        "higher_is_better": r.higher_is_better, "primary": r.primary, "margin": r.margin,
        "verdict": r.verdict, "regressed": r.regressed, "method": e.method if e else None,
        "median_base": e.median_base if e else None, "median_exp": e.median_exp if e else None,
        "mean_base": e.mean_base if e else None, "mean_exp": e.mean_exp if e else None,
        "delta": _num(e.delta) if e else None, "ci_lo": _num(e.lo) if e else None,
        "ci_hi": _num(e.hi) if e else None, "p": e.p if e else None, "q": r.q,
        "n_base": r.n_base, "n_exp": r.n_exp, "cv_base": r.cv_base, "cv_exp": r.cv_exp, "mde": r.mde,
        "warnings": list(r.warnings), "base_values": list(r.base_values), "exp_values": list(r.exp_values),
    }


def _num(x: float | None):
    if x is None or math.isfinite(x):
        return x
    return "inf" if x > 0 else "-inf"


def _finite(x):
    return str(x)


def render_csv(a: Analysis) -> str:
    buf = io.StringIO()
    fields = ["workload", "metric", "label", "variant", "unit", "higher_is_better", "verdict", "method",
              "median_base", "median_exp", "delta", "ci_lo", "ci_hi", "p", "q", "n_base", "n_exp", "cv_base",
              "cv_exp", "mde"]
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in a.rows:
        w.writerow(_row_dict(r))
    return buf.getvalue()
