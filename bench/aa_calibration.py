"""A/A calibration: how often does perfab call `**` when nothing changed?

Records real per-run noise on this machine (``_noise.record``: two bundled
workloads, both sides the same binary), prints that real A/A report, then
runs 200 simulated A/A reports: for every recorded metric both sides are
drawn (with replacement, n per side) from the same pooled samples, compared
with perfab's default method, FDR-adjusted across the report's rows and
given perfab's verdict.  Prints the fraction of `**` rows (target <= 5%).

    .venv/bin/python bench/aa_calibration.py [--runs 30] [--n 20] [--sims 200]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from _noise import noise, record

from perfab.analyse.checks import adjust
from perfab.analyse.compare import analyse, verdict
from perfab.analyse.methods import AssumeNothing, relative_cv
from perfab.report import render


def simulate(pool: dict, n: int, sims: int, shift: float, margin: float, alpha: float, seed: int):
    """Verdict counts per metric over ``sims`` simulated reports; ``shift`` multiplies the experiment side."""
    rng = np.random.default_rng(seed)
    method = AssumeNothing()
    keys = list(pool)
    stars = {k: 0 for k in keys}
    for _ in range(sims):
        ests = [method.compare(rng.choice(pool[k], n), rng.choice(pool[k], n) * (1 + shift), 0.95) for k in keys]
        qs = adjust([e.p for e in ests], "bh")
        for k, e, q in zip(keys, ests, qs):
            stars[k] += verdict(e, margin, q, alpha) == "**"
    return stars


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30, help="real runs per side to record")
    ap.add_argument("--n", type=int, default=20, help="runs per side in each simulated comparison")
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--db", type=Path, help="reuse a recording (default: a fresh one in a temp dir)")
    args = ap.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="perfab-aa-")) / "aa.db"
    store = record(db, args.runs)
    print(f"Real A/A on this machine ({args.runs} runs per side, same binary both sides), db {db}:\n")
    real = analyse(store, "aa")
    print(render(real, "text"))
    real_stars = [r for r in real.rows if r.verdict == "**"]
    print(f"real A/A rows called **: {len(real_stars)} of {len(real.rows)}\n")
    pool = noise(store)
    for (w, m), v in pool.items():
        print(f"  noise {w:<10} {m:<12} robust CV {100 * relative_cv(v):6.2f}%  ({len(v)} samples)")
    stars = simulate(pool, args.n, args.sims, 0.0, margin=0.001, alpha=0.05, seed=7)
    total = sum(stars.values())
    rows = args.sims * len(pool)
    print(f"\nsimulated A/A: {args.sims} reports x {len(pool)} rows, n = {args.n} per side, "
          f"BH FDR 0.05, margin 0.1%")
    for k, c in stars.items():
        print(f"  {k[0]:<10} {k[1]:<12} ** in {c:4d} of {args.sims}")
    print(f"fraction of ** rows: {total / rows:.4f}  (target <= 0.05)")


if __name__ == "__main__":
    main()
