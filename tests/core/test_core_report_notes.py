"""Readable at any size: notes ranked, those that change no verdict folded into one line, repeated warnings
counted after the first few, a warning over thousands of sessions kept to one line."""

from __future__ import annotations

from dataclasses import replace

import pytest

from test_core_report_golden import _experiment

from perfab.analyse.compare import analyse
from perfab.analyse.diagnostics import Diagnostic, Kind
from perfab.analyse.pooling import _describe
from perfab.report import render
from perfab.store import Store

DRIFT = Diagnostic(Kind.DRIFT, "a trend against run order on inline (rho 0.71, p 0.004)", {"side": "inline"})
GRID = Diagnostic(Kind.RESOLUTION, "values sit on a grid of 50% of the baseline: flat cannot be shown",
                  {"resolution": 0.5, "margin": 0.005, "coarse": False})


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    db = tmp_path_factory.mktemp("notes") / "r.db"
    _experiment(db, {"outline": 1.0, "inline": 1.03})
    with Store(db) as store:
        return analyse(store)


def _with(a, metric: str, *diagnostics: Diagnostic, failed: dict | None = None):
    rows = tuple(replace(r, warnings=r.warnings + diagnostics) if r.metric == metric else r for r in a.rows)
    workloads = tuple(replace(w, failed=failed) for w in a.workloads) if failed else a.workloads
    return replace(a, rows=rows, workloads=workloads)


def test_notes_that_change_a_verdict_are_ranked_and_the_rest_fold_into_one_line(analysis):
    a = _with(analysis, "ops/s", GRID, DRIFT, failed={"inline": ["exit status 1"]})
    text = render(a)
    tail = text.split("-" * 62)[-1].strip().splitlines()
    assert tail[:3] == ["lock+unlock ops/s: higher = better. Time elapsed/User: lower = better.",
                        "** = beyond per-run noise (+-0.00..0.36%), ns = within noise, flat = within",
                        "  +-0.5%."]
    assert tail[4:] == ["Failed runs on inline: 1 (exit status 1)",  # missing data first, then doubts
                        "lock+unlock ops/s: a trend against run order on inline (rho 0.71, p 0.004)",
                        "4 notes change no verdict: tests, Delta without %, MDE, grid (see --verbose)"]
    assert "grid of 50%" not in text and "Tests:" not in text
    verbose = render(a, verbose=True)
    assert "lock+unlock ops/s: values sit on a grid of 50%" in verbose and "Tests: checksum" in verbose
    assert verbose.index("grid of 50%") < verbose.index("a trend against run order")  # document order


def test_the_fold_line_stays_one_line_however_many_topics_it_folds(analysis):
    basis = Diagnostic(Kind.BASIS, "Delta is the shift over the baseline median", {"basis": "shift/median"})
    sequential = Diagnostic(Kind.SEQUENTIAL, "undecided at the last look", {"state": "ns", "decided_at": None})
    a = analysis
    for metric in ("ops/s", "wall_s", "user_s"):
        a = _with(a, metric, GRID, basis)
    a = _with(a, "sys_s", sequential)
    last = render(a).rstrip().splitlines()[-1]  # one grid note names its three rows; "grid, basis" do not fit
    assert last == "5 notes change no verdict: tests, Delta without %, MDE, ... (see --verbose)"
    assert "undecided at the last look" in render(a)  # a sequential row's state changes what its verdict means


def test_repeated_warnings_name_a_few_and_count_the_rest(analysis):
    unfinished = tuple(Diagnostic(Kind.UNFINISHED, f"session {i} is not finished (status aborted)",
                                  {"session": i, "status": "aborted"}) for i in range(1, 10_001))
    order = Diagnostic(Kind.SEQUENTIAL_ORDER, "sequential order: drift is confounded", {"order": "sequential"})
    a = replace(analysis, warnings=(*unfinished, order))
    warnings = render(a).split("WARNINGS\n")[1].splitlines()
    assert warnings == ["- session 1 is not finished (status aborted)", "- session 2 is not finished (status aborted)",
                        "- session 3 is not finished (status aborted)",
                        "- ... and 9,997 more unfinished warnings (--verbose or --format json lists them)",
                        "- sequential order: drift is confounded"]
    assert render(a, verbose=True).count("is not finished") == 10_000


def test_a_pooling_warning_over_thousands_of_sessions_names_a_few_ids():
    """A million-run report was 798 lines, most of them one warning naming 10,000 session ids."""
    groups = {f"spec {k}": list(range(k + 1, 10_001, 10)) for k in range(10)}
    text = _describe(groups, "version")
    assert text == ("version 1 in sessions 1, 11, 21 and 997 more; version 2 in sessions 2, 12, 22 and 997 more; "
                    "version 3 in sessions 3, 13, 23 and 997 more; 7 more versions in 7,000 sessions")
    assert _describe({"a": [1], "b": [2, 3]}) == "a in session 1; b in sessions 2, 3"
    assert _describe({"a": [1, 2, 3, 4]}) == "a in sessions 1, 2, 3, 4"
