"""Rendering an analysis in the format asked for (``perfab.report.render``), and the regressions it shows."""

from __future__ import annotations

from perfab.analyse.compare import Analysis
from perfab.errors import UsageError
from perfab.report.document import Report, document
from perfab.report.formats import render_csv, render_json, render_markdown
from perfab.report.kinds import FORMATS
from perfab.report.numbers import fmt_change
from perfab.report.text import render_text

RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json, "csv": render_csv}


def _render_html(doc: Report) -> str:
    from perfab.report.html import render_html  # imported on use: the text path stays light

    return render_html(doc)


RENDERERS["html"] = _render_html


def _render_lkp(doc: Report) -> str:
    from perfab.report.lkp import render_lkp

    return render_lkp(doc)


RENDERERS["lkp"] = _render_lkp


def render(analysis: Analysis, fmt: str = "text", absolute: bool = False, verbose: bool = False) -> str:
    """The report in format ``fmt``; ``absolute`` shows values, not % of the baseline, in 3+ side tables;
    ``verbose`` prints every note and warning of the text report (``perfab.report.notes``).

    Every format renders the one report document (``perfab.report.document``) built here."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise UsageError(f"unknown report format {fmt!r}; use one of: {', '.join(FORMATS)}") from None
    doc = document(analysis)
    return render_text(doc, absolute, verbose) if fmt == "text" else renderer(doc)


def regressions(analysis: Analysis) -> list[str]:
    """Primary metrics that regressed beyond noise, for ``--fail-on-regression``."""
    out = []
    for r in analysis.rows:
        if r.primary and r.regressed:
            point = "".join(f" {k}={v}" for k, v in r.params)
            out.append(f"{r.workload}/{r.label}{point} [{r.variant}] {fmt_change(r)}")
    return out
