"""The HTML plots draw at most ``DOTS_PER_SIDE`` runs per side and say so; small experiments draw every run."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "html"))
from html_helpers import LOCKBENCH, TWO, analysis_of, lockbench, run_fake  # noqa: E402

from perfab.report.html import plots  # noqa: E402


def _dots(svg: str) -> list[int]:
    return [len(re.findall(r"M[-\d.e]+ [-\d.e]+h0", d)) for d in re.findall(r'class="dots [^"]*" d="([^"]*)"', svg)]


def _row(tmp_path):
    run_fake(LOCKBENCH.format(runs=6, variants=TWO, label="lock+unlock ops/s"), tmp_path / "r.db",
             lockbench({"outline": 1.0, "inline": 1.03}))
    return next(r for r in analysis_of(tmp_path / "r.db").rows if r.estimate is not None)


def test_a_side_of_5000_runs_is_drawn_as_1000_and_the_caption_says_so(tmp_path):
    row = _row(tmp_path)
    rng = np.random.default_rng(2)
    many = replace(row, base_values=tuple(rng.normal(100, 1, 5000)), exp_values=tuple(rng.normal(101, 1, 3000)),
                   base_order=tuple(range(0, 10000, 2)), exp_order=tuple(range(1, 6000, 2)))
    for svg in (plots.runs_plot([many], "outline"), plots.order_plot([many], "outline")):
        assert sorted(_dots(svg), reverse=True)[:2] == [plots.DOTS_PER_SIDE, plots.DOTS_PER_SIDE]
        assert "1,000 evenly spaced of up to 5,000 runs per side drawn" in svg


def test_a_small_experiment_draws_every_run_with_the_former_caption(tmp_path):
    row = _row(tmp_path)
    svg = plots.runs_plot([row], "outline")
    assert _dots(svg)[:2] == [len(row.base_values), len(row.exp_values)]
    assert "evenly spaced" not in svg and "every run" in svg


def test_shown_spreads_over_the_whole_side():
    picked = plots.shown(5000)
    assert len(picked) == plots.DOTS_PER_SIDE and picked[0] == 0 and picked[-1] == 4999
    assert plots.shown(7) == list(range(7))


def test_a_page_of_10000_sessions_stays_small(tmp_path):
    """The page was 11 MB at a million runs: every run-order plot marked all 10,000 session starts, and every
    unfinished session was a warning of its own.  Each metric's plots over 10,000 sessions (100,000 runs; the
    dots drawn per side are capped above) and 10,000 such warnings now add less than 60 KB per metric to the
    page of 12 runs (``bench/analysis_growth.py`` measures the page of a million stored runs)."""
    from perfab.analyse.diagnostics import Diagnostic, Kind
    from perfab.report import render

    run_fake(LOCKBENCH.format(runs=6, variants=TWO, label="lock+unlock ops/s"), tmp_path / "r.db",
             lockbench({"outline": 1.0, "inline": 1.03}))
    small = analysis_of(tmp_path / "r.db")
    rng = np.random.default_rng(3)
    sessions, per = 10_000, 5  # runs per side and session
    at = np.arange(sessions * 2 * per)
    order = at % (2 * per) + at // (2 * per) * plots.SESSION_STRIDE
    base_order, exp_order = tuple(order[0::2].tolist()), tuple(order[1::2].tolist())
    base, exp = tuple(rng.normal(100, 1, sessions * per)), tuple(rng.normal(101, 1, sessions * per))
    rows = tuple(replace(r, base_values=base, exp_values=exp, base_order=base_order, exp_order=exp_order)
                 if r.estimate is not None else r for r in small.rows)
    unfinished = tuple(Diagnostic(Kind.UNFINISHED, f"session {i} is not finished (status aborted)",
                                  {"session": i, "status": "aborted"}) for i in range(1, sessions + 1))
    big = replace(small, rows=rows, warnings=small.warnings + unfinished, sessions=sessions)
    page, before = render(big, "html").encode(), render(small, "html").encode()
    metrics = sum(1 for r in rows if r.estimate is not None)
    assert len(page) - len(before) < 60_000 * metrics, (len(page), len(before), metrics)
    assert f"{plots.SESSION_MARKS} of 9,999 session starts marked" in page.decode()
    assert "9,997 more unfinished warnings" in page.decode()
