"""Sequential decisions: the runner's contract, the interval at each look, error under monitoring, Holm and BY."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfab.analyse.compare import verdict
from perfab.analyse.methods import AssumeNothing, get_method
from perfab.analyse.multiplicity import adjust_anytime
from perfab.analyse.rci import look
from perfab.analyse.sequential import Design, SequentialRow, decide, replay
from perfab.analyse.serial import widen
from perfab.errors import UsageError


def _row(rng, n, shift, cv=0.01, margin=0.005, key="r", primary=False):
    base = np.exp(rng.normal(0.0, cv, n))
    exp = np.exp(rng.normal(math.log1p(shift), cv, n))
    return SequentialRow(key, tuple(base), tuple(exp), margin, primary)


def _prefix(rows, runs):
    return [SequentialRow(r.key, r.base[:runs], r.exp[:runs], r.margin, r.primary, r.exact) for r in rows]


def test_holm_and_by_match_a_hand_computed_example():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.06, 0.04*1) = 0.06.
    assert adjust_anytime(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BY: BH values 0.02, 0.02, 0.04, 0.04 (sorted order) times 1 + 1/2 + 1/3 + 1/4 = 25/12.
    h = 25 / 12
    assert adjust_anytime(p, "by") == pytest.approx([0.02 * h, 0.04 * h, 0.04 * h, 0.02 * h])


def test_weighted_holm_matches_a_hand_computed_example():
    # Weights 0.8 (the primary row), 0.1, 0.1; order by p / w: 0.0375, 0.04, 2.0.
    # Row 0: 0.03 * 1.0 / 0.8 = 0.0375; row 1: 0.004 * 0.2 / 0.1 = 0.008 -> 0.0375 (monotone); row 2: 0.2 * 0.1 / 0.1.
    assert adjust_anytime([0.03, 0.004, 0.2], "holm", [0.8, 0.1, 0.1]) == pytest.approx([0.0375, 0.0375, 0.2])
    # Unweighted the primary row misses alpha 0.05: 0.004 * 3 = 0.012, 0.03 * 2 = 0.06, 0.2.
    assert adjust_anytime([0.03, 0.004, 0.2], "holm") == pytest.approx([0.06, 0.012, 0.2])


def test_the_runner_loop_on_prefixes_reaches_the_replayed_decision():
    rng = np.random.default_rng(11)
    rows = [_row(rng, 30, 0.02, key="ops", primary=True), _row(rng, 30, 0.0, key="rss")]
    design = Design(min_runs=6, max_runs=30)
    decision = decide(_prefix(rows, 0), design)
    while not decision.stop:
        decision = decide(_prefix(rows, decision.next_runs), design)
    replayed = replay(rows, design)
    assert decision.runs_per_side == replayed.runs_per_side < 30
    assert [r.state for r in decision.rows] == [r.state for r in replayed.rows]
    assert decision.rows[0].state == "**" and decision.rows[1].state == "continue"
    assert decision.reason.startswith(f"stopped after {decision.runs_per_side} runs per side: every primary row")


def test_before_the_first_look_the_runner_is_told_when_to_look():
    rng = np.random.default_rng(1)
    d = decide(_prefix([_row(rng, 10, 0.0)], 4), Design(min_runs=6, max_runs=20))
    assert not d.stop and d.next_runs == 6 and d.look == 0
    assert d.reason == "continue: first look after 6 runs per side"


def test_the_interval_at_a_look_is_the_rank_interval_at_the_nominal_level():
    rng = np.random.default_rng(5)
    base, exp = rng.lognormal(0, 0.02, 14), rng.lognormal(0.01, 0.02, 12)
    lk = look(base, exp, 0.004, 0.012, 0.4)
    assert lk.factor >= 1.0  # widened for serial correlation as a fixed report's row is (12 runs per side)
    est = AssumeNothing().compare(base, exp, 1 - widen(0.012, lk.factor))
    assert (lk.delta, lk.lo, lk.hi) == pytest.approx((est.delta, est.lo, est.hi), rel=1e-12)
    # The margin test and the interval agree: the interval at 1 - nu clears the margin exactly when pi <= nu.
    for nu in (lk.pi * 0.99, lk.pi * 1.01):
        e = AssumeNothing().compare(base, exp, 1 - widen(nu, lk.factor))
        assert (e.lo > 0.004 or e.hi < -0.004) == (lk.pi <= nu)


@pytest.mark.parametrize("step,spread", [(0.004, 0.008), (0.004, 0.001), (1.0, 3.0)])
def test_on_a_grid_the_interval_at_a_look_is_the_rank_methods_widened_one(step, spread):
    # Spread over several steps (rounding triangles) and under one step (the worst rounding error).
    rng = np.random.default_rng(7)
    base = np.round(rng.normal(40 * step, spread, 16) / step) * step
    exp = np.round(rng.normal(40.5 * step, spread, 14) / step) * step
    lk = look(base, exp, 0.002, 0.02, 0.5)
    est = AssumeNothing().compare(base, exp, 1 - widen(0.02, lk.factor))
    assert est.resolution > 0 and lk.resolution == pytest.approx(est.resolution)
    assert (lk.delta, lk.lo, lk.hi) == pytest.approx((est.delta, est.lo, est.hi), rel=1e-9, abs=1e-12)


def test_a_clear_change_is_decided_at_the_first_look_that_can_check_serial_correlation():
    """Before 12 runs per side a look assumes lag-1 correlation 0.6 (at 0.6, bare looks at 6 to 10 runs called a
    false `**` in 19% of A/A experiments), so a clear change is `**` at 12; a null one runs to max_runs."""
    rng = np.random.default_rng(2)
    d = replay([_row(rng, 20, 0.10, cv=0.005, margin=0.01)], Design(min_runs=6, max_runs=20))
    assert d.runs_per_side == 12 and d.rows[0].state == "**" and d.rows[0].decided_at == 12
    early = replay([_row(rng, 20, 0.10, cv=0.005, margin=0.01)], Design(min_runs=12, max_runs=20))
    assert early.runs_per_side == 12 and early.rows[0].state == "**"
    d = replay([_row(rng, 20, 0.0, cv=0.02, margin=0.001)], Design(min_runs=6, max_runs=20))
    assert d.runs_per_side == 20 and d.rows[0].state == "ns"
    assert "minimum detectable effect" in d.rows[0].reason and d.rows[0].mde > 0.02
    assert d.reason == "stopped at max_runs (20 runs per side): 1 ns"


def test_a_a_on_a_quiet_machine_stops_flat_early():
    rng = np.random.default_rng(3)
    d = replay([_row(rng, 40, 0.0, cv=0.002, margin=0.01, key=k) for k in "abc"], Design(min_runs=6, max_runs=40))
    assert d.stop and d.runs_per_side <= 12
    assert [r.state for r in d.rows] == ["flat"] * 3
    assert all(-0.01 <= r.estimate.lo and r.estimate.hi <= 0.01 for r in d.rows)


def test_intervals_are_intersected_across_looks():
    rng = np.random.default_rng(4)
    row = _row(rng, 24, 0.0, cv=0.01, margin=0.001)
    d = decide([row], Design(min_runs=6, max_runs=24))
    fresh = AssumeNothing().compare(np.array(row.base), np.array(row.exp), 0.95)
    est = d.rows[0].estimate
    assert est.method == "sequential" and est.lo <= est.hi
    assert est.hi - est.lo > 0 and (est.lo, est.hi) != (fresh.lo, fresh.hi)


def test_deterministic_counts_are_decided_by_the_exact_method_at_the_first_look():
    rows = [SequentialRow("instructions", (100.0,) * 8, (90.0,) * 8, 0.001, exact=True),
            SequentialRow("checksum", (7.0,) * 8, (7.0,) * 8, 0.001, exact=True)]
    d = decide(rows, Design(min_runs=6, max_runs=30))
    assert d.stop and [r.state for r in d.rows] == ["**", "flat"] and d.rows[0].decided_at == 6


def test_coarse_timings_use_the_rank_method_for_grids():
    rng = np.random.default_rng(6)
    base = tuple(np.round(rng.normal(0.400, 0.008, 20) / 0.004) * 0.004)  # a 4 ms clock
    exp = tuple(np.round(rng.normal(0.440, 0.008, 20) / 0.004) * 0.004)
    d = replay([SequentialRow("user_s", base, exp, 0.005)], Design(min_runs=6, max_runs=20))
    assert d.rows[0].state == "**" and d.rows[0].estimate.resolution > 0
    same = replay([SequentialRow("user_s", base, base, 0.001)], Design(min_runs=6, max_runs=20))
    assert same.rows[0].state == "ns"  # a 1% grid cannot show a 0.1% margin


def test_failed_runs_leave_a_side_short_and_the_row_is_still_decided():
    rng = np.random.default_rng(9)
    row = _row(rng, 20, 0.05, cv=0.01, margin=0.005)
    short = SequentialRow("ops", row.base[:20], row.exp[:15], row.margin)  # five experiment runs failed
    d = decide([short], Design(min_runs=6, max_runs=20))
    assert d.rows[0].state == "**" and d.rows[0].estimate.lo > 0.005
    assert (d.rows[0].estimate.median_exp, d.runs_per_side) == (pytest.approx(np.median(row.exp[:15])), 20)


def test_stop_on_all_waits_for_every_row_and_primary_only_for_the_primary_ones():
    rng = np.random.default_rng(10)
    rows = [_row(rng, 30, 0.05, cv=0.005, margin=0.005, key="ops", primary=True),
            _row(rng, 30, 0.0, cv=0.02, margin=0.005, key="rss")]
    primary, every = replay(rows, Design(min_runs=6, max_runs=30)), replay(rows, Design(min_runs=6, max_runs=30,
                                                                                          stop_on="all"))
    assert primary.runs_per_side == 12 < every.runs_per_side
    assert primary.rows[1].state == "continue" and every.rows[1].state in ("flat", "ns")


@pytest.mark.parametrize("kwargs,needle", [
    (dict(min_runs=1), "need 2 <= min_runs <= max_runs"), (dict(min_runs=10, max_runs=8), "min_runs 10"),
    (dict(alpha=0.6), "alpha 0.6"), (dict(confidence=1.0), "1 - confidence"),
    (dict(spending="haybittle"), "use one of pocock, obrien-fleming, linear"),
    (dict(multiple="bh"), "use one of holm, by"), (dict(block=0), "block 0"),
    (dict(primary_share=1.0), "primary_share 1")])
def test_a_bad_design_is_one_line_naming_the_fix(kwargs, needle):
    with pytest.raises(UsageError, match=needle):
        Design(**kwargs)


def test_the_sequential_method_is_registered_and_spends_everything_by_the_samples_at_hand():
    rng = np.random.default_rng(8)
    base, exp = rng.lognormal(0, 0.01, 20), rng.lognormal(0.01, 0.01, 20)
    seq, fixed = get_method("sequential").compare(base, exp, 0.95), AssumeNothing().compare(base, exp, 0.95)
    assert seq.method == "sequential" and seq.delta == pytest.approx(fixed.delta)
    # The newest look alone (shift_lo/hi are not intersected) is wider than the fixed interval: looks cost width.
    assert seq.shift_lo < fixed.shift_lo and seq.shift_hi > fixed.shift_hi


def _naive_star(report, design: Design) -> bool:
    """The fixed-sample verdict redone after every block, stopping at the first **."""
    for n in design.schedule(design.max_runs):
        for r in report:
            e = AssumeNothing().compare(np.array(r.base[:n]), np.array(r.exp[:n]), 0.95)
            if verdict(e, r.margin, e.p, 0.05) == "**":
                return True
    return False


def _aa_reports(sims: int, rows: int, design: Design, seed: int, naive: bool = True) -> tuple[int, int]:
    """(reports with a false ** under the sequential rule, under the fixed test redone after every block)."""
    rng = np.random.default_rng(seed)
    seq = peeked = 0
    for _ in range(sims):
        report = [_row(rng, design.max_runs, 0.0, cv=0.01, margin=0.0, key=i) for i in range(rows)]
        seq += any(r.state == "**" for r in replay(report, design).rows)
        peeked += naive and _naive_star(report, design)
    return seq, peeked


def test_monitoring_after_every_block_keeps_false_stars_under_alpha():
    # A/A, margin 0 (the hardest null), a look every block from 6 to 30 runs per side: 13 looks.
    sims = 300
    seq, naive = _aa_reports(sims, 1, Design(min_runs=6, max_runs=30), seed=21)
    assert seq / sims <= 0.05
    assert naive / sims > 0.10  # the same looks with the fixed-sample test: the error that the design removes


def test_holm_keeps_the_report_wide_error_under_alpha_when_monitoring_many_rows():
    sims = 120
    seq, _ = _aa_reports(sims, 5, Design(min_runs=6, max_runs=20, stop_on="all"), seed=22, naive=False)
    assert seq / sims <= 0.05
