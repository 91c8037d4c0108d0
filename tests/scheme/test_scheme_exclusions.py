"""Runs perf could not count fully: multiplexed or ``<not counted>`` counters, and perf's own exit 255.

A counter that ran 67.00% of the time (perf scaled it up) or printed
``<not counted>`` is excluded from that metric in that run only; the run's
other counters still count, and the text report names the reason and the
number of runs.  ``perf stat`` exiting 255 with a header-only output file
(``tests/data/perf/vm_group_unsupported.*``: "The cycles:u event is not
supported.") fails the run, and the report says why.
"""

from __future__ import annotations

import json

import pytest

from perfab.plan import make_plan
from perfab.specfile import parse_spec
from scheme_helpers import L1I_K, L1I_U, SPEC_000, levels_000, report, run_experiment, stored_runs, unwrap
from scheme_perf import Fault, FakePerf

MULTIPLEXED = "multiplexed: the counter ran 67.00% of the time and perf scaled it up; lower max_events_per_run"
NOT_COUNTED = "<not counted>: the counter never ran (perf could not schedule it, or the run was too short)"
GROUP_FAILED = ("perf stat could not open the counter group (exit 255): The cycles:u event is not supported.; "
                "remove the event or see `perfab counters`")


def _seqs(side: str, group: int) -> list[int]:
    """Plan positions of ``side``'s measured runs carrying group 0 (:u) or 1 (:k)."""
    plan = make_plan(parse_spec(SPEC_000), n_groups=2)
    return [p.seq for p in plan if p.variant == side and p.group == group and not p.warmup]


def _n(doc: dict, metric: str) -> tuple[int, int]:
    row = next(r for r in doc["rows"] if r["metric"] == metric)
    return row["n_base"], row["n_exp"]


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """Two inline :k runs with L1i:k multiplexed at 67.00%, one outline :u run with cycles <not counted>."""
    k_runs, u_run = _seqs("inline", 1)[:2], _seqs("outline", 0)[3]
    faults = {seq: Fault(multiplexed={L1I_K: 67.0}) for seq in k_runs}
    faults[u_run] = Fault(not_counted=("cycles",))
    db = tmp_path_factory.mktemp("partial") / "results.db"
    run_experiment(SPEC_000, db, FakePerf(levels_000(), seed=1, faults=faults))
    return db, k_runs, u_run


def test_an_excluded_counter_leaves_the_rest_of_its_run(partial):
    db, k_runs, u_run = partial
    runs = {r["seq"]: r for r in stored_runs(db)}
    for seq in k_runs:
        assert runs[seq]["status"] == "ok" and runs[seq]["excluded"] == {L1I_K: MULTIPLEXED}
        assert {"cycles", "instructions", "IPC", "ops/s", "wall_s"} <= set(runs[seq]["metrics"])
        assert L1I_K not in runs[seq]["metrics"] and "L1i MPKI :k" not in runs[seq]["metrics"]
    assert runs[u_run]["excluded"] == {"cycles": NOT_COUNTED}
    assert {L1I_U, "instructions", "L1i MPKI :u"} <= set(runs[u_run]["metrics"])
    assert "cycles" not in runs[u_run]["metrics"] and "IPC" not in runs[u_run]["metrics"]


def test_n_drops_only_for_the_excluded_metric_and_what_is_computed_from_it(partial):
    doc = json.loads(report(partial[0], "json"))
    assert doc["runs_per_side"] == {"outline": 20, "inline": 20}
    assert _n(doc, L1I_K) == _n(doc, "L1i MPKI :k") == (10, 8)
    assert _n(doc, "cycles") == _n(doc, "IPC") == (19, 20)
    assert _n(doc, "instructions") == _n(doc, "ops/s") == (20, 20) and _n(doc, L1I_U) == (10, 10)
    assert doc["workloads"][0]["excluded"] == {f"{L1I_K}: {MULTIPLEXED}": 2, f"cycles: {NOT_COUNTED}": 1}
    assert next(r for r in doc["rows"] if r["metric"] == L1I_K)["verdict"] == "**"  # 10 vs 8 still decide


def test_text_report_names_each_exclusion_with_its_reason_and_run_count(partial):
    text = unwrap(report(partial[0]))
    assert f"Excluded L1i-miss :k: {MULTIPLEXED} (2 runs)" in text  # the row's label, not the event
    assert f"Excluded Cycles: {NOT_COUNTED} (1 run)" in text
    assert "Failed" not in text


def test_perf_exit_255_is_a_failed_run_with_its_reason(db):
    failing = _seqs("inline", 0)[2]
    perf = FakePerf(levels_000(), seed=1, faults={failing: Fault(group_unsupported=True)})
    run_experiment(SPEC_000, db, perf)
    runs = {r["seq"]: r for r in stored_runs(db)}
    assert runs[failing]["status"] == "failed" and runs[failing]["reason"] == GROUP_FAILED
    assert runs[failing]["metrics"] == {}
    assert [r["seq"] for r in runs.values() if r["status"] != "ok"] == [failing]
    doc = json.loads(report(db, "json"))
    assert doc["runs_per_side"] == {"outline": 20, "inline": 19}
    assert _n(doc, "cycles") == (20, 19) and _n(doc, L1I_U) == (10, 9) and _n(doc, L1I_K) == (10, 10)
    assert doc["workloads"][0]["failed"] == {"inline": [GROUP_FAILED]}
    text = unwrap(report(db))
    assert f"Failed runs on inline: 1 ({GROUP_FAILED})" in text
    assert f"rocksdb: 1 failed run(s) on inline (first: {GROUP_FAILED})" in text
