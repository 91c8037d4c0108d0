"""The audit's cases, seeded: clock ticks are never `flat`, sequential looks are widened for serial correlation and
keep the exact tolerance, one run of exact counts is never `**`, a constant side's verdict does not depend on its
unit, no shift is invented from zeros, and a `nan` in a workload's output is left out of its row with the reason.

Each names the figure the audit measured before the fix.  Monte-Carlo checks are seeded and small (a few hundred
simulated experiments); ``bench/verdict_rules.py`` measures the same cases with more.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from stats_sim import Simulator, ar1, ticks

from perfab.analyse.methods import AssumeNothing
from perfab.analyse.sequential import Design, SequentialRow, replay
from perfab.metrics import CLOCK_TICK_S, resolve

ALPHA = 0.05


def _rates(rows) -> dict[str, float]:
    rows = list(rows)
    return {v: sum(r == v for r in rows) / len(rows) for v in ("**", "flat", "ns")}


def test_a_change_on_rescaled_clock_ticks_is_never_flat():
    """5 ticks of 4 ms with the kernel's rescaling jitter, +5% (five times the 1% margin): `flat` in 40-51% before.

    Where every run of both sides read the same tick count the values hold no trace of the clock (and no change):
    only a declared clock (``Metric.step``) can help there, about 0.3% of rows at +5%.
    """
    sim = Simulator(["cpu_s"], margin_pct=1.0)
    rng = np.random.default_rng(2701)
    for shift in (0.05, 0.20):
        flat = 0
        for _ in range(150):
            base, exp = ticks(rng, 20, 0.020), ticks(rng, 20, 0.020 * (1 + shift))
            row = sim.rows({"cpu_s": (base, exp)})["cpu_s"]
            if row.verdict == "flat":
                flat += 1
                assert np.ptp(np.concatenate([base, exp])) < 0.002, (base, exp)  # one tick count everywhere
        assert flat <= 2, (shift, flat)


def test_the_audits_end_to_end_tick_row_is_not_flat():
    """``cpu_s 0.0040 0.0060 +0.03% flat``: one tick against one or two, medians 50% apart, once read `flat`."""
    sim = Simulator(["cpu_s"], margin_pct=1.0)
    rng = np.random.default_rng(2702)
    for _ in range(100):
        base = ticks(rng, 20, 0.0041)
        exp = ticks(rng, 20, 0.0060)
        row = sim.rows({"cpu_s": (base, exp)})["cpu_s"]
        assert row.verdict in ("**", "ns"), (row.verdict, np.median(base), np.median(exp))


def test_rusage_cpu_times_carry_the_kernels_clock_tick():
    """user and sys time are tick-sampled: the catalogue gives them USER_HZ's tick, and no finer margin is flat."""
    import os

    assert CLOCK_TICK_S == pytest.approx(1 / os.sysconf("SC_CLK_TCK"))
    for name in ("user_s", "sys_s", "service_user_s", "service_sys_s"):
        assert resolve(name).step == CLOCK_TICK_S
    assert resolve("wall_s").step == 0.0
    sim = Simulator(["user_s"], margin_pct=1.0)
    rng = np.random.default_rng(2703)
    verdicts = [sim.rows({"user_s": (0.08 * rng.lognormal(0, 0.002, 20), 0.0804 * rng.lognormal(0, 0.002, 20))}
                         )["user_s"] for _ in range(20)]
    # continuous values (a task that took no system tick reads its precise runtime) are not widened for rounding,
    # but the declared clock keeps the row from `flat`
    assert all(r.step == CLOCK_TICK_S and r.estimate.step == 0.0 for r in verdicts)
    assert all(r.estimate.resolution >= CLOCK_TICK_S / 0.081 and r.verdict != "flat" for r in verdicts)
    assert any("coarser than the +-1% margin" in w.text for w in verdicts[0].warnings)


def _sequential(rng, draw, shift: float, trials: int, margin: float = 0.001, step: float = 0.0,
                exact: bool = False, design: Design | None = None) -> dict[str, float]:
    design = design or Design(min_runs=6, max_runs=40)
    states = []
    for _ in range(trials):
        base, exp = draw(rng, design.max_runs), draw(rng, design.max_runs) * (1 + shift)
        row = SequentialRow("r", tuple(base), tuple(exp), margin, primary=True, exact=exact, step=step)
        states.append(replay([row], design, estimates=False).rows[0].state)
    return _rates(states)


@pytest.mark.parametrize("rho", [0.3, 0.6])
def test_sequential_looks_are_widened_for_serial_correlation(rho):
    """A/A, AR(1) in run order, looks after every block from 6 to 40 runs: `**` 0.12 at rho 0.3, 0.43 at 0.6."""
    rates = _sequential(np.random.default_rng(2704), lambda rng, n: ar1(rng, n, rho), 0.0, 200)
    assert rates["**"] <= ALPHA, rates


def test_a_sequential_experiment_on_clock_ticks_never_stops_flat():
    """Ticks, +5% and +20% at a 1% margin: stopped `flat` in 78% and 26% of experiments before."""
    rng = np.random.default_rng(2705)
    for shift in (0.05, 0.20):
        rates = _sequential(rng, lambda rng, n: ticks(rng, n, 0.020), shift, 100, margin=0.01)
        assert rates["flat"] == 0, (shift, rates)
    declared = _sequential(rng, lambda rng, n: 0.08 * rng.lognormal(0, 0.002, n), 0.004, 50, margin=0.01,
                           step=CLOCK_TICK_S)
    assert declared["flat"] == 0, declared  # the catalogue's clock, in sequential mode too


def test_sequential_exact_rows_keep_the_tolerance():
    """Counts varying 0.05% within a side (under the 0.1% tolerance), A/A: `**` 0.315 in sequential mode before."""
    rates = _sequential(np.random.default_rng(2706), lambda rng, n: np.round(1e6 * (1 + rng.uniform(0, 5e-4, n))),
                        0.0, 200, margin=0.0, exact=True)
    assert rates["**"] == 0, rates


def test_one_run_of_exact_counts_is_unchecked_and_never_a_change():
    """An A/A whose work varies 3% per run, one run per side, read `instructions -0.18% **` (0.97 of the time)."""
    sim = Simulator(["ins"], exact=("ins",))
    rng = np.random.default_rng(2707)
    for cv in (0.03, 0.001):
        rows = [sim.rows({"ins": (np.round(6e6 * rng.lognormal(0, cv, 1)), np.round(6e6 * rng.lognormal(0, cv, 1)))}
                         )["ins"] for _ in range(200)]
        assert not any(r.verdict == "**" for r in rows)
        assert all(r.estimate.unchecked and any("unchecked" in w.text for w in r.warnings) for r in rows)
    real = sim.rows({"ins": (np.full(1, 6e6), np.full(1, 5.6e6))})["ins"]
    assert real.verdict == "ns"  # even a real -6.7%: one run shows nothing repeats
    checked = sim.rows({"ins": (np.full(2, 6e6), np.full(2, 5.6e6))})["ins"]
    assert checked.verdict == "**" and not checked.estimate.unchecked  # the second run checks the first


@pytest.mark.parametrize("margin_pct", [0.1, 1.0])
def test_a_constant_sides_verdict_does_not_depend_on_its_unit(margin_pct):
    """1.0 against 1.02 was `ns`, 1000 against 1020 `**`: the step came from the printed digits."""
    sim = Simulator(["m"], margin_pct=margin_pct)
    fixed, sequential = set(), set()
    for scale in (1e-3, 1.0, 1000.0, 1e6):
        row = sim.rows({"m": (np.full(20, 1.0 * scale), np.full(20, 1.02 * scale))})["m"]
        fixed.add((row.verdict, round(row.estimate.lo, 7), round(row.estimate.hi, 7)))
        assert sim.rows({"m": (np.full(20, scale), np.full(20, scale))})["m"].verdict == "flat"
        seq = SequentialRow("r", (1.0 * scale,) * 20, (1.02 * scale,) * 20, margin_pct / 100)
        sequential.add(replay([seq], Design(min_runs=6, max_runs=20), estimates=False).rows[0].state)
    assert len(fixed) == 1 and len(sequential) == 1, (fixed, sequential)
    assert next(iter(fixed))[0] == "**"  # +2%: beyond the margin by more than the margin's resolution


def test_no_shift_is_invented_where_the_raw_estimate_is_zero():
    """``Sys (s) 0 0 -1.973e-08``: the rounding triangles moved an estimate of exactly 0."""
    sim = Simulator(["sys_s"])
    row = sim.rows({"sys_s": (np.zeros(20), np.zeros(20))})["sys_s"]
    assert row.estimate.shift == 0.0 and row.verdict != "**"
    rng = np.random.default_rng(2708)
    base = np.round(rng.normal(0.0, 0.01, 20) / 0.004) * 0.004 + 0.0  # a grid around 0, median differences 0
    est = AssumeNothing().compare(base, base[::-1].copy(), 0.95)
    assert est.shift == 0.0


def test_no_infinite_interval_on_finite_data():
    """The cliff's cap made the interval -inf..+inf on about 0.3% of independent rows."""
    sim = Simulator(["m"])
    rng = np.random.default_rng(2709)
    for n in (12, 16, 20):
        for _ in range(40):
            row = sim.rows({"m": (ar1(rng, n, 0.9), ar1(rng, n, 0.9))})["m"]
            assert np.isfinite(row.estimate.lo) and np.isfinite(row.estimate.hi), (n, row.estimate)


NAN_WORKLOAD = """#!/bin/sh
# prints ops: 100 (and a little more each run), except on its third run, which prints ops: nan; and a run count
n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$0.count"
if [ "$n" -eq 3 ]; then echo "ops: nan"; else echo "ops: 10$n"; fi
echo "runs: $n"
"""


def test_a_nan_in_keyvalue_output_leaves_that_run_out_of_its_row_with_the_reason(tmp_path):
    """A `nan` line is no `name: number` line: the run's metric was dropped with no note, the header said 4 + 4."""
    from core_helpers import cli

    script = tmp_path / "work.sh"
    script.write_text(NAN_WORKLOAD)
    script.chmod(0o755)
    spec = tmp_path / "nan.toml"
    spec.write_text(f'[experiment]\nname = "nan"\nruns = 4\nwarmup = 0\norder = "sequential"\n\n'
                    f'[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n'
                    f'[[workload]]\nname = "w"\nargv = ["{script}"]\nparser = "keyvalue"\n\n'
                    f'[[workload.metric]]\nname = "ops"\ndirection = "higher"\n')
    db = tmp_path / "r.db"
    code, out, err = cli("run", str(spec), "--db", str(db), "--no-report")
    assert code == 0, err
    code, out, err = cli("report", "--db", str(db), "--format", "json")
    assert code == 0, err
    row = next(r for r in json.loads(out)["rows"] if r["metric"] == "ops")
    assert (row["n_base"], row["n_exp"]) == (3, 4)
    used = [w for w in row["warnings"] if w["kind"] == "runs_used"]
    assert [w["data"] for w in used] == [{"side": "a", "used": 3, "dropped": 1, "reason": used[0]["data"]["reason"]}]
    assert "not in the workload's output" in used[0]["data"]["reason"] and "used 3 of 4 runs" in used[0]["text"]
    code, text, _ = cli("report", "--db", str(db))
    assert "used 3 of 4 runs" in " ".join(text.split())
