"""Verdicts on coarse, tied, zero and non-finite data: `flat` only when shown, `**` only when beyond noise.

The Monte-Carlo checks are small and seeded: 300 simulated experiments of
20 runs per side each, in a few seconds.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from perfab.analyse.compare import verdict
from perfab.analyse.methods import AssumeNothing
from perfab.analyse.grid import resolution
from perfab.analyse.ranks import rank_sum_p

METHOD = AssumeNothing()


def _verdicts(rng, trials, n, shift, cv, x0, step, margin):
    out = {"**": 0, "flat": 0, "ns": 0}
    for _ in range(trials):
        base = x0 * rng.lognormal(0, cv, n)
        exp = x0 * (1 + shift) * rng.lognormal(0, cv, n)
        if step:
            base, exp = np.round(base / step) * step, np.round(exp / step) * step
        est = METHOD.compare(base, exp, 0.95)
        out[verdict(est, margin, est.p, 0.05)] += 1
    return {k: v / trials for k, v in out.items()}


@pytest.mark.parametrize("cv", [0.01, 0.02, 0.05])
def test_a_5_percent_change_on_a_4ms_clock_is_never_called_flat(cv):
    """Rusage on a 4 ms clock: the HL interval once collapsed to [0, 0] and +5% read `flat` 48% of the time."""
    rates = _verdicts(np.random.default_rng(11), 300, 20, 0.05, cv, 0.08, 0.004, 0.005)
    assert rates["flat"] <= 0.05, rates


def test_a_10_percent_change_on_a_4ms_clock_is_never_flat_and_found_with_noise_to_dither():
    rates = _verdicts(np.random.default_rng(12), 300, 20, 0.10, 0.02, 0.08, 0.004, 0.005)
    assert rates["flat"] == 0 and rates["**"] >= 0.8, rates


def test_a_a_on_a_coarse_clock_gives_no_false_change():
    rates = _verdicts(np.random.default_rng(13), 300, 20, 0.0, 0.02, 0.08, 0.004, 0.005)
    assert rates["**"] <= 0.05 and rates["flat"] == 0, rates


def test_power_on_data_rounded_to_1_percent_stays_within_10_points_of_continuous():
    """Data rounded to 1% of the value: p < 0.05 in 83% of trials but `**` only 30% before ties were handled."""
    continuous = _verdicts(np.random.default_rng(14), 300, 20, 0.01, 0.01, 1.0, 0.0, 0.001)
    rounded = _verdicts(np.random.default_rng(14), 300, 20, 0.01, 0.01, 1.0, 0.01, 0.001)
    assert continuous["**"] >= 0.7, continuous
    assert rounded["**"] >= continuous["**"] - 0.10, (continuous, rounded)


@pytest.mark.parametrize("sigma_over_step", [0.25, 0.5, 1.0, 2.0])
def test_a_a_on_rounded_data_keeps_false_changes_under_alpha(sigma_over_step):
    rates = _verdicts(np.random.default_rng(15), 300, 20, 0.0, 0.01 * sigma_over_step, 1.0, 0.01, 0.001)
    assert rates["**"] <= 0.05, rates


def _brute_force_p(base, exp):
    """Two-sided permutation p of the rank sum with mid-ranks, by enumerating every split."""
    from scipy import stats

    pooled = np.concatenate([base, exp])
    ranks = stats.rankdata(pooled)
    m, total = len(exp), len(pooled)
    center = m * (total + 1) / 2
    observed = abs(ranks[len(base):].sum() - center)
    hits = count = 0
    for idx in itertools.combinations(range(total), m):
        count += 1
        hits += abs(ranks[list(idx)].sum() - center) >= observed - 1e-9
    return hits / count


@pytest.mark.parametrize("seed", range(6))
def test_rank_sum_p_on_heavily_tied_data_is_the_permutation_p(seed):
    """The tie-corrected normal approximation was up to 0.32 below the permutation p on clock-tick data."""
    rng = np.random.default_rng(seed)
    base = rng.choice([0.076, 0.080, 0.084], size=7, p=[0.2, 0.6, 0.2])
    exp = rng.choice([0.080, 0.084, 0.088], size=7, p=[0.3, 0.5, 0.2])
    assert rank_sum_p(base, exp) == pytest.approx(_brute_force_p(base, exp), abs=1e-12)


def test_resolution_is_read_within_sides_never_from_the_gap_between_them():
    assert resolution(np.array([0.076, 0.080, 0.080, 0.084]), np.array([0.080, 0.088])) == pytest.approx(0.004)
    assert resolution(np.array([1.0, 1.1, 1.3]), np.array([2.0, 2.5])) == 0.0  # no repeats: continuous
    # sides that read one value each say nothing of their grid: the margin's resolution, never the printed digits
    assert resolution(np.full(5, 14_680_103.0), np.full(5, 13_762_334.0), margin=0.001) == pytest.approx(7_340.0515)
    step = resolution(np.full(20, 14_680_103.0), np.full(20, 13_762_334.0), margin=0.001)
    est = METHOD.compare(np.full(20, 14_680_103.0), np.full(20, 13_762_334.0), 0.95, step=step)
    assert verdict(est, 0.001, est.p, 0.05) == "**"  # deterministic counts stay decisive


def test_flat_needs_a_resolution_finer_than_the_margin():
    base = np.array([0.080] * 10 + [0.084] * 5 + [0.076] * 5)
    est = METHOD.compare(base, base.copy(), 0.95)
    assert est.resolution == pytest.approx(0.05)
    assert verdict(est, 0.005, est.p, 0.05) == "ns"
    assert verdict(est, 0.10, est.p, 0.05) == "flat"  # a 10% margin is coarser than the grid


def test_non_finite_samples_are_refused_with_the_reason(tmp_path):
    """An inf that reached the analysis gave `**` with Delta NaN; now the row is refused, the reason shown."""
    import sqlite3

    from core_helpers import cli, fake_runner, two_sides

    db = tmp_path / "r.db"
    runner, _, store = fake_runner(two_sides(runs=4, warmup=0), db)
    runner.run()
    store.close()
    con = sqlite3.connect(db)
    con.execute("UPDATE samples SET value = 9e999 WHERE metric = 'wall_s' AND run_id = 1")
    con.commit()
    con.close()
    code, out, err = cli("report", "--db", str(db), "--format", "json")
    assert code == 0, err
    import json

    row = next(r for r in json.loads(out)["rows"] if r["metric"] == "wall_s")
    assert row["verdict"] == "-" and row["delta"] is None
    assert [(w["kind"], w["data"]) for w in row["warnings"]] == [("non_finite", {"samples": 1})]
    assert "non-finite" in row["warnings"][0]["text"]
    code, text, _ = cli("report", "--db", str(db))
    assert "Time elapsed: 1 non-finite sample(s) (inf or nan): refused" in " ".join(text.split())
    assert "nan" not in text.lower().replace("nan)", "")


def test_zero_baseline_reports_the_shift_in_the_metrics_unit(tmp_path):
    """Medians 0 -> 2,140 once printed Delta '-' and `ns`."""
    import json

    from core_helpers import FakeOutcome, cli, fake_runner, two_sides

    workload = 'argv = ["w"]\nparser = "keyvalue"\n[[workload.metric]]\nname = "shootdowns"\ndirection = "lower"'

    def behaviour(argv, env):
        side = env.get("SIDE")
        value = 0 if side == "a" else 2140 + len(behaviour.calls) % 7
        behaviour.calls.append(1)
        return FakeOutcome(wall_s=0.1, stdout=f"shootdowns: {value}\n".encode())

    behaviour.calls = []
    variants = '[[variant]]\nname = "a"\nenv = {SIDE = "a"}\n\n[[variant]]\nname = "b"\nenv = {SIDE = "b"}\n'
    db = tmp_path / "r.db"
    runner, _, store = fake_runner(two_sides(runs=8, warmup=0, workload=workload, variants=variants), db, behaviour)
    runner.run()
    store.close()
    code, out, _ = cli("report", "--db", str(db), "--format", "json")
    row = next(r for r in json.loads(out)["rows"] if r["metric"] == "shootdowns")
    assert row["basis"] == "absolute" and row["delta"] is None and row["verdict"] == "**" and row["regressed"]
    assert 2140 <= row["shift"] <= 2147
    code, text, _ = cli("report", "--db", str(db))
    line = next(x for x in text.splitlines() if x.startswith("shootdowns"))
    assert line.split()[-2:] == [line.split()[-2], "**"] and line.split()[-2].startswith("+2,14")
    assert "Delta without %" in text
    assert math.isfinite(row["shift_lo"])


def test_the_two_cluster_screen_is_quiet_on_merely_discrete_data():
    """Ashman's D was infinite on clock-tick data (91-100% of rows warned) and on whole context-switch counts."""
    from perfab.analyse.checks import bimodal

    rng = np.random.default_rng(21)
    clock = [np.round(0.08 * rng.lognormal(0, 0.03, 30) / 0.004) * 0.004 for _ in range(200)]
    switches = [rng.poisson(3, 30).astype(float) for _ in range(200)]
    assert sum(bimodal(x, "a") is not None for x in clock) <= 2
    assert sum(bimodal(x, "a") is not None for x in switches) <= 2
    two = np.r_[np.full(15, 0.080), np.full(15, 0.120)] + np.round(rng.normal(0, 0.001, 30) / 0.004) * 0.004
    assert bimodal(two, "a") is not None  # clusters ten steps apart still show
