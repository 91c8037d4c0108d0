"""Issue 19's figures, before and after, side by side in one run: seeded Monte Carlo through ``compare()``.

Builds the tree of ``--before`` (a git revision, by default the commit
before the verdict-rule changes) with ``git archive``, then runs the same
measurements in two child processes, one per tree, and prints one line
per figure: before, after.  Every experiment is drawn with the same seed
in both trees.

    PYTHONPATH=src .venv/bin/python bench/verdict_rules.py [--before c835a2f] [--trials 200]

Figures (n = 20 per side unless said):
  exact_aa      A/A, exact-by-default counts with 1% CV, 5 runs: `**` rate
  zero_named    one zero among 20 runs, +1% at CV 1%: rows that say Delta is a shift over the median
  grid_p        CV 1% on a 2% grid (sigma = step/2), +1%: rank-test p < 0.05 rate
  grid_1, grid_2, grid_aa  the same at +1%, +2% and 0: `**` rate;  grid_cover  coverage at +1%
  grid_incoh    grid rows (2% and 1% grids, 0..+2%) whose p <= 0.05 disagrees with the 95% interval
  primary       +1% at CV 1% as the primary row of a 10-row report: `**` rate (single row: about 0.75)
  ar1_aa        A/A, AR(1) rho 0.5 within each side, one row: `**` rate
  indep_power   +1% at CV 1%, independent runs, one row: `**` rate (what the serial check costs)
  aa_<model>    A/A 10-row reports (one row primary) under each noise model of the audit: share of
                reports with any `**` (normal, lognormal, t3, grid 2%, rounded 1%, tied, bimodal, AR(1) 0.5)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(trials: int) -> dict[str, float]:
    """All figures with the perfab on sys.path."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from stats_sim import Simulator

    from perfab.analyse.ranks import rank_sum_p

    out: dict[str, float] = {}
    rng = np.random.default_rng(19)
    sim = Simulator(["ins"], exact=("ins",))
    out["exact_aa"] = np.mean([sim.rows({"ins": (np.round(6e6 * rng.lognormal(0, 0.01, 5)),
                                                 np.round(6e6 * rng.lognormal(0, 0.01, 5)))})["ins"].verdict == "**"
                               for _ in range(trials)])
    one = Simulator(["m"])
    named = 0
    for _ in range(trials):
        base, exp = rng.lognormal(0, 0.01, 20), rng.lognormal(0.01, 0.01, 20)
        base[3] = 0.0
        named += any("shift over the baseline median" in w for w in one.rows({"m": (base, exp)})["m"].warnings)
    out["zero_named"] = named / trials
    out.update(_grid(one, rng, trials, rank_sum_p))
    ten = [f"m{i}" for i in range(10)]
    report = Simulator(ten, primary=("m0",))
    out["primary"] = np.mean([report.rows({m: (rng.lognormal(0, 0.01, 20), rng.lognormal(0.01 if m == "m0" else 0,
                                                                                         0.01, 20)) for m in ten}
                                         )["m0"].verdict == "**" for _ in range(trials // 2)])
    out["ar1_aa"] = np.mean([one.rows({"m": (_ar1(rng, 0.5), _ar1(rng, 0.5))})["m"].verdict == "**"
                             for _ in range(trials)])
    out["indep_power"] = np.mean([one.rows({"m": (rng.lognormal(0, 0.01, 20), rng.lognormal(0.01, 0.01, 20))}
                                           )["m"].verdict == "**" for _ in range(trials)])
    out.update(_noise_models(rng, max(20, trials // 4)))
    return {k: float(v) for k, v in out.items()}


def _noise_models(rng, reports: int) -> dict[str, float]:
    """Share of A/A 10-row reports with any `**`, per noise model (CV about 1%)."""
    import numpy as np
    from stats_sim import Simulator

    ten = [f"m{i}" for i in range(10)]
    sim = Simulator(ten, primary=("m0",))
    models = {
        "normal": lambda: 1 + 0.01 * rng.normal(size=20),
        "lognormal": lambda: rng.lognormal(0, 0.01, 20),
        "t3": lambda: 1 + 0.01 * rng.standard_t(3, 20),
        "grid": lambda: np.round(rng.lognormal(0, 0.01, 20) / 0.02) * 0.02,
        "rounded": lambda: np.round(rng.lognormal(0, 0.01, 20) / 0.01) * 0.01,
        "tied": lambda: rng.choice([0.98, 1.0, 1.0, 1.0, 1.02], 20),
        "bimodal": lambda: rng.lognormal(0, 0.01, 20) * np.where(rng.random(20) < 0.3, 1.05, 1.0),
        "ar1": lambda: _ar1(rng, 0.5),
    }
    out = {}
    for name, draw in models.items():
        hits = 0
        for _ in range(reports):
            rows = sim.rows({m: (draw(), draw()) for m in ten})
            hits += any(r.verdict == "**" for r in rows.values())
        out[f"aa_{name}"] = hits / reports
    return out


def _grid(sim, rng, trials, rank_sum_p) -> dict[str, float]:
    import numpy as np

    out, incoherent, rows = {}, 0, 0
    for step, shift in ((0.02, 0.01), (0.02, 0.02), (0.02, 0.0), (0.01, 0.01)):
        hits = covered = small_p = 0
        for _ in range(trials):
            base = np.round(rng.lognormal(0, 0.01, 20) / step) * step
            exp = np.round((1 + shift) * rng.lognormal(0, 0.01, 20) / step) * step
            row = sim.rows({"m": (base, exp)})["m"]
            est = row.estimate
            hits += row.verdict == "**"
            covered += est.lo <= shift <= est.hi
            small_p += rank_sum_p(base, exp) < 0.05
            incoherent += (est.p <= 0.05) != (est.lo > 0 or est.hi < 0)
            rows += 1
        if step == 0.02 and shift == 0.01:
            out.update(grid_p=small_p / trials, grid_1=hits / trials, grid_cover=covered / trials)
        if step == 0.02 and shift == 0.02:
            out["grid_2"] = hits / trials
        if step == 0.02 and shift == 0.0:
            out["grid_aa"] = hits / trials
    out["grid_incoh"] = incoherent / rows
    return out


def _ar1(rng, rho: float, n: int = 20, cv: float = 0.01):
    import numpy as np

    e = rng.normal(0, cv * np.sqrt(1 - rho ** 2), n)
    x = np.empty(n)
    x[0] = rng.normal(0, cv)
    for t in range(1, n):
        x[t] = rho * x[t - 1] + e[t]
    return np.exp(x)


def _child(src: Path, trials: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, __file__, "--measure", str(trials)], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="c835a2f", help="git revision of the tree to compare with")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "src"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        before = _child(Path(tmp) / "src", args.trials)
    after = _child(ROOT / "src", args.trials)
    print(f"{'figure':<14}{'before':>9}{'after':>9}   ({args.trials} experiments each, seed 19)")
    for key in after:
        print(f"{key:<14}{before.get(key, float('nan')):>9.3f}{after[key]:>9.3f}")


if __name__ == "__main__":
    main()
