"""Seed 000's counting scheme end to end: 3 PMU counters, :u and :k in separate runs, pooled where shared.

The perf backend builds the real ``perf stat -j`` argv; ``FakePerf`` answers
it with perf 6.1 JSON in the recorded layout (see ``scheme_perf``), so the
plan, the backend's parsing, the store, the analysis and the report formats
all run for real.  Generator seed 1 reproduces seed 000's verdict on every
row; at this n and noise each ``ns`` row (a -0.34% shift under 1% noise) is
``ns`` for about 7 in 8 generator seeds (28 of the first 40 give all rows).
"""

from __future__ import annotations

import json

import pytest

from scheme_helpers import L1I_K, L1I_U, report, stored_runs

GROUP_U = "cycles,instructions,L1-icache-load-misses:u,user_time,system_time"
GROUP_K = "cycles,instructions,L1-icache-load-misses:k,user_time,system_time"
WARMUPS = 2  # one per side, planned first


def _events(argv: list[str]) -> str:
    return argv[argv.index("-e") + 1]


def _side(argv: list[str]) -> str:
    return argv[argv.index("--") + 1].split("/")[2]


def test_each_side_carries_u_in_ten_runs_and_k_in_ten_interleaved(seed000):
    _, executor, _ = seed000
    measured = [argv for argv, _, _ in executor.calls[WARMUPS:]]
    assert len(measured) == 40
    for side in ("outline", "inline"):
        groups = [_events(a) for a in measured if _side(a) == side]
        assert groups.count(GROUP_U) == 10 and groups.count(GROUP_K) == 10 and len(groups) == 20
    for block in range(10):  # ABBA/BAAB blocks of 4, each with one group, alternating u, k, u, k...
        runs = measured[4 * block: 4 * block + 4]
        assert {_events(a) for a in runs} == {GROUP_U if block % 2 == 0 else GROUP_K}
        sides = [_side(a) for a in runs]
        assert sides == sides[::-1] and sorted(sides) == ["inline", "inline", "outline", "outline"]
    assert all(a[:5] == ["perf", "stat", "-j", "-o", a[4]] and a[4].endswith("/perf.stat") for a in measured)


def test_shared_counters_pool_all_twenty_runs_and_each_split_its_ten(seed000, rows):
    pooled = ["cycles", "instructions", "IPC", "CPI", "ops/s", "wall_s"]
    split = [L1I_U, L1I_K, "L1i MPKI :u", "L1i MPKI :k"]
    assert {m: (rows[m]["n_base"], rows[m]["n_exp"]) for m in pooled} == {m: (20, 20) for m in pooled}
    assert {m: (rows[m]["n_base"], rows[m]["n_exp"]) for m in split} == {m: (10, 10) for m in split}
    doc = json.loads(report(seed000[0], "json"))
    assert doc["runs_per_side"] == {"outline": 20, "inline": 20}
    assert doc["groups"] == [g.split(",")[:3] for g in (GROUP_U, GROUP_K)]


def test_verdicts_reproduce_seed_000(rows):
    verdicts = {m: rows[m]["verdict"] for m in (L1I_K, L1I_U, "instructions", "cycles", "ops/s", "IPC", "wall_s")}
    assert verdicts == {L1I_K: "**", L1I_U: "**", "instructions": "flat", "cycles": "ns", "ops/s": "ns",
                        "IPC": "ns", "wall_s": "ns"}
    assert rows[L1I_K]["delta"] == pytest.approx(0.0911, abs=0.003)
    assert rows[L1I_U]["delta"] == pytest.approx(0.0390, abs=0.003)
    assert abs(rows["instructions"]["delta"]) < 0.0005 and rows["instructions"]["margin"] == 0.001
    assert rows[L1I_K]["regressed"] and rows[L1I_U]["regressed"]  # misses: lower is better
    assert rows["L1i MPKI :k"]["verdict"] == rows["L1i MPKI :u"]["verdict"] == "**"


def test_stored_counts_are_what_perf_wrote_and_ratios_come_from_the_same_run(seed000):
    db, _, perf = seed000
    runs = stored_runs(db)
    assert len(runs) == len(perf.written) == 42
    for run, wrote in zip(runs, perf.written):
        assert run["status"] == "ok" and run["variant"] == wrote.side
        m, c = run["metrics"], wrote.counts
        l1i = L1I_U if L1I_U in wrote.events else L1I_K
        other = L1I_K if l1i == L1I_U else L1I_U
        assert {e: m[e] for e in ("cycles", "instructions", l1i)} == {e: c[e] for e in ("cycles", "instructions", l1i)}
        assert m["IPC"] == c["instructions"] / c["cycles"]
        assert m[f"L1i MPKI :{l1i[-1]}"] == 1000 * c[l1i] / c["instructions"]
        assert other not in m and f"L1i MPKI :{other[-1]}" not in m
        assert m["wall_s"] == wrote.wall_s


def test_text_report_has_the_derived_rows_and_fits_80_columns(seed000):
    text = report(seed000[0])
    labels = [line.split("  ")[0] for line in text.splitlines()]
    for label in ("L1i-miss :k (kernel)", "L1i-miss :u (userspace)", "Instructions (total)", "IPC",
                  "L1i MPKI :k", "L1i MPKI :u", "Cycles (total)", "Throughput ops/s", "Time elapsed (s)"):
        assert label in labels
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Failed" not in text and "Excluded" not in text
