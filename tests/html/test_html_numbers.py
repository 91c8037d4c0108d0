"""Every percentage and ratio through the report's one number format: no "+1.5e+04%" axis beside an "x59.7"
table cell, no ratio interval below -100%, no "1e+02%" in a warning; plots with axis titles.

Regressions from a new user's HTML report: a ratio interval of -124.87%, a count delta drawn on a
"+1.5e+04%" axis while the table said "x59.7", and "1e+02%" in text warnings.
"""

from __future__ import annotations

import re
from dataclasses import replace

from html_helpers import LOCKBENCH, TWO, analysis_of, lockbench, parse, run_fake

from perfab.report import render
from perfab.report.document import document
from perfab.report.html import render_html
from perfab.units import fmt_pct, fmt_rel, rel_ticks

SCIENTIFIC = re.compile(r"\d[eE][+-]\d")


def test_percentages_are_never_scientific():
    assert fmt_pct(1.0) == "100%" and fmt_pct(0.5) == "50%" and fmt_pct(0.005) == "0.5%"
    assert fmt_pct(150.0) == "15,000%" and fmt_pct(1.2e-7) == "0.000012%"
    assert fmt_pct(0.999, digits=3) == "99.9%" and fmt_pct(0.95, digits=3) == "95%"
    assert not any(SCIENTIFIC.search(fmt_pct(10.0 ** k)) for k in range(-9, 9))


def test_relative_changes_share_one_notation_and_stop_at_minus_100():
    assert fmt_rel(58.7) == "x59.7" and fmt_rel(0.0123) == "+1.23%" and fmt_rel(-0.00001) == "+0.00%"
    assert fmt_rel(-1.2487) == "-100.00%"
    assert rel_ticks([0, 50, 100, 150]) == ["+0%", "x51.0", "x101.0", "x151.0"]
    assert rel_ticks([-0.02, -0.01, 0, 0.01]) == ["-2%", "-1%", "+0%", "+1%"]


def test_a_count_sixty_times_larger_is_drawn_in_the_tables_notation(db):
    run_fake(LOCKBENCH.format(runs=8, variants=TWO, label="lock+unlock ops/s"), db,
             lockbench({"outline": 1.0, "inline": 59.7}))
    a = analysis_of(db)
    page = render_html(document(a))
    doc = parse(page)
    ops = next(r for r in a.rows if r.metric == "ops/s")
    delta_svg = doc.by_id("w0-p0-m0").all("svg")[1]
    ticks = [t.text() for t in delta_svg.all("text", "tick")]
    assert ticks and all(t.startswith(("x", "+", "-")) for t in ticks), ticks
    assert any(t.startswith("x") for t in ticks)  # the axis reaches ten times: the table's "x" notation
    assert "x" in render(a, "text").split("lock+unlock ops/s")[1].splitlines()[0]
    assert not SCIENTIFIC.search(doc.text()), SCIENTIFIC.search(doc.text())
    assert ops.estimate.delta > 50


def test_a_ratio_interval_is_clipped_at_minus_100_percent(improved):
    a = analysis_of(improved)
    ops = next(r for r in a.rows if r.metric == "ops/s")
    wide = replace(ops, estimate=replace(ops.estimate, lo=-1.2487))
    page = render_html(document(replace(a, rows=tuple(wide if r is ops else r for r in a.rows))))
    assert "-124.87%" not in page and "-124" not in parse(page).text()
    assert "-100.00% .. " in page


def test_plots_name_their_axes(improved):
    doc = parse(render_html(document(analysis_of(improved))))
    runs, delta, order = doc.by_id("w0-p0-m0").all("svg")
    assert [t.text() for t in delta.all("text", "axis-title")] == ["change against the baseline"]
    assert [t.text() for t in runs.all("text", "axis-title")] == ["ops/s"]
    assert [t.text() for t in order.all("text", "axis-title")] == ["position in the plan"]
