"""Power: how often does perfab call `**` for a real +1% change at this machine's noise?

Uses the same recorded noise as ``aa_calibration.py`` (pass ``--db`` to
reuse its recording), shifts the experiment side by +1% and counts `**`
over 200 simulated reports of n = 20 per side (target >= 80% where the
noise allows it).  Then prints the minimum detectable effect against n and
noise, from perfab's formula, each checked by simulation with normal noise.

    .venv/bin/python bench/power.py [--db PATH] [--n 20] [--sims 200]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from _noise import noise, record
from aa_calibration import simulate

from perfab.analyse.methods import min_detectable_effect, relative_cv


def mde_table(sims: int) -> None:
    ns = (5, 10, 20, 40, 80)
    cvs = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05)
    print("\nminimum detectable effect (80% power, alpha 0.05, Mann-Whitney), % shift")
    print("noise CV " + "".join(f"{'n=' + str(n):>10}" for n in ns))
    for cv in cvs:
        cells = [min_detectable_effect(n, n, cv, 0.05) for n in ns]
        print(f"{100 * cv:7.2f}% " + "".join(f"{100 * c:9.2f}%" for c in cells))
    print("\nsimulated power at the tabulated MDE (normal noise, one row, margin 0):")
    rng = np.random.default_rng(3)
    for n, cv in ((10, 0.01), (20, 0.01), (20, 0.005), (40, 0.02)):
        mde = min_detectable_effect(n, n, cv, 0.05)
        pool = {("normal", f"cv{cv}"): rng.normal(1.0, cv, 20000)}
        hits = simulate(pool, n, sims, mde, margin=0.0, alpha=0.05, seed=n)
        print(f"  n={n:3d} cv={100 * cv:.2f}%  MDE {100 * mde:.2f}%  power {next(iter(hits.values())) / sims:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--shift", type=float, default=0.01)
    ap.add_argument("--db", type=Path)
    args = ap.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="perfab-power-")) / "aa.db"
    pool = noise(record(db, args.runs))
    stars = simulate(pool, args.n, args.sims, args.shift, margin=0.001, alpha=0.05, seed=11)
    print(f"injected {100 * args.shift:+.1f}% shift on every row, n = {args.n} per side, {args.sims} simulated "
          f"reports, margin 0.1%, alpha 0.05; fraction called **")
    print("  noise = robust CV (1.4826 MAD / median) of the recorded runs; "
          "MDE and n for 80% from perfab's formula (margin included)")
    print(f"  {'workload':<10} {'metric':<12} {'noise':>7} {'MDE':>7}  {'alone':>6}  {'in a report (BH)':>16}"
          f"  {'n for 80%':>9}")
    for k, c in stars.items():
        cv = relative_cv(pool[k])
        mde = min_detectable_effect(args.n, args.n, cv, 0.05, margin=0.001)
        alone = simulate({k: pool[k]}, args.n, args.sims, args.shift, margin=0.001, alpha=0.05, seed=13)[k]
        need = next((n for n in range(4, 2001) if min_detectable_effect(n, n, cv, 0.05, margin=0.001) <= args.shift),
                    None)
        print(f"  {k[0]:<10} {k[1]:<12} {100 * cv:6.2f}% {100 * mde:6.2f}%  {alone / args.sims:6.2f}  "
              f"{c / args.sims:16.2f}  {need if need else '>2000':>9}")
    mde_table(args.sims)


if __name__ == "__main__":
    main()
