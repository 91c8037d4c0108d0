"""Stage 6: rendering an analysis as text, markdown, JSON or CSV."""

from __future__ import annotations

from perfab.analyse.compare import Analysis
from perfab.errors import UsageError
from perfab.report.formats import render_csv, render_json, render_markdown
from perfab.report.text import render_text

FORMATS = {"text": render_text, "markdown": render_markdown, "json": render_json, "csv": render_csv}


def render(analysis: Analysis, fmt: str = "text") -> str:
    try:
        return FORMATS[fmt](analysis)
    except KeyError:
        raise UsageError(f"unknown report format {fmt!r}; use one of: {', '.join(FORMATS)}") from None


def regressions(analysis: Analysis) -> list[str]:
    """Primary metrics that regressed beyond noise, for ``--fail-on-regression``."""
    return [f"{r.workload}/{r.label} [{r.variant}] {100 * r.estimate.delta:+.2f}%" for r in analysis.rows
            if r.primary and r.regressed]
