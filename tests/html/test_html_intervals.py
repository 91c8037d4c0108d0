"""The HTML sweep plot shows the intervals the text report shows: read from both outputs of one analysis.

Real runs of a shell loop (``RealExecutor``) at 3, 5 and 20 runs per point: at 3 and 5 runs no
95% interval of the median exists (the analysis's ends are infinite, the text says "too few
runs"), so the plot must draw none; at 20 both show the same order statistics.
"""

from __future__ import annotations

import math
import re

import pytest

from html_helpers import analysis_of, parse
from perfab.report import render
from perfab.report.document import document
from perfab.report.html import render_html
from perfab.run.backends import TimeBackend
from perfab.run.executor import RealExecutor
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Store

CURVE = """\
[experiment]
name = "curve"
runs = {runs}
warmup = 0

[[variant]]
name = "only"

[[workload]]
name = "loop"
argv = ["sh", "-c", "i=0; while [ $i -lt {{loops}} ]; do i=$((i+1)); done"]
params = {{ loops = [200, 2000] }}
"""

_NUMBER = r"-?[\d,]*\.?\d+(?:e[+-]?\d+)?"
_TEXT_ROW = re.compile(rf"^(loops=\d+)\s+({_NUMBER})\s+(?:({_NUMBER}) \.\. ({_NUMBER})|\(too few runs\))\s+(\d+)$")
_TIP = re.compile(rf"^only, loops=(\d+): median ({_NUMBER}), 95% interval (?:({_NUMBER}) \.\. ({_NUMBER})|none "
                  r"\(too few runs\)), n=(\d+)$")


def _text_intervals(text: str) -> dict[tuple[str, str], tuple]:
    """(metric title, point) -> (median, lo, hi, n) from the text report's scaling tables (lo, hi None: none)."""
    out, title = {}, None
    for line in text.splitlines():
        if (m := _TEXT_ROW.match(line)) is not None and title is not None:
            out[(title, m[1])] = (m[2], m[3], m[4], int(m[5]))
        elif line and not line.startswith(("Point", "-")) and _TEXT_ROW.match(line) is None:
            title = re.sub(r" \((?:lower|higher) = better\)$", "", line)
    return out


def _html_intervals(page: str) -> tuple[dict[tuple[str, str], tuple], dict[str, int]]:
    """(label, point) -> (median, lo, hi, n) from the sweep plots' tooltips, and label -> whiskers drawn."""
    out, whiskers = {}, {}
    for svg in parse(page).all("svg"):
        label = svg.attrs.get("aria-label", "")
        if not label.endswith(" against loops"):
            continue
        label = label.removesuffix(" against loops")
        groups = svg.all("g", "median")
        whiskers[label] = sum(len(g.all("line", "ci")) for g in groups)
        for g in groups:
            m = _TIP.match(g.all("title")[0].text())
            out[(label, f"loops={m[1]}")] = (m[2], m[3], m[4], int(m[5]))
    return out, whiskers


def _same(a: str | None, b: str | None) -> bool:
    """Two printed numbers agree to the precision of the coarser one."""
    if a is None or b is None:
        return a is b
    x, y = float(a.replace(",", "")), float(b.replace(",", ""))
    step = max(10.0 ** -len(s.split(".")[1]) if "." in s else 1.0 for s in (a, b))
    return math.isclose(x, y, rel_tol=1e-4, abs_tol=step / 2 + 1e-12)


@pytest.mark.parametrize("runs", [3, 5, 20])
def test_plot_and_text_show_the_same_intervals(tmp_path, runs):
    db = tmp_path / "curve.db"
    with Store(db) as store:
        assert Runner(parse_spec(CURVE.format(runs=runs), "spec.toml"), store, TimeBackend(), RealExecutor(),
                      {}).run().status == "finished"
    a = analysis_of(db)
    text = _text_intervals(render(a, "text"))
    html, whiskers = _html_intervals(render_html(document(a)))
    assert {k[0] for k in html} >= {"Time elapsed (s)", "User (s)", "Ctx switches vol"}
    assert set(html) == set(text) and len(text) == 2 * len({k[0] for k in text})
    for key, (median, lo, hi, n) in text.items():
        got = html[key]
        assert n == got[3] == runs, key
        assert _same(median, got[0]) and _same(lo, got[1]) and _same(hi, got[2]), (key, text[key], got)
    bounded = runs >= 6  # at 95%: P(all n runs on one side of the median) = 2 / 2**n must be below 5%
    assert all((lo is not None) == bounded for _, lo, _, _ in text.values())
    assert all(count == (2 if bounded else 0) for count in whiskers.values()), whiskers
    for s in a.summaries:  # the numbers come from the analysis: infinite ends exactly when it has none
        assert math.isfinite(s.lo) == bounded and s.n == runs
