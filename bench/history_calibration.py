"""Calibration of ``perfab history``'s change points: false alarms without a change, power with one step.

Seeded simulated series of session medians: without a change (normal,
log-normal and outlier-ridden noise), the share with any change point
should stay at or under alpha; with one step of k standard deviations in
the middle, the share where the step is found at its place.

    .venv/bin/python bench/history_calibration.py [--sims 1000] [--n 10 20 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from perfab.analyse.edivisive import EDivisive  # noqa: E402

NOISE = {
    "normal": lambda rng, n: rng.normal(size=n),
    "log-normal": lambda rng, n: np.exp(rng.normal(0, 0.5, n)) / 0.53,  # about unit sd, skewed right
    "normal + 2 outliers": lambda rng, n: rng.normal(size=n) + np.isin(np.arange(n), rng.integers(0, n, 2)) * 15,
}


def false_alarms(method: EDivisive, n: int, sims: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {kind: sum(bool(method.detect(100 + make(rng, n)).change_points) for _ in range(sims)) / sims
            for kind, make in NOISE.items()}


def power(method: EDivisive, n: int, steps: list[float], sims: int, seed: int) -> dict[float, float]:
    rng = np.random.default_rng(seed)
    at = n // 2
    out = {}
    for k in steps:
        hits = 0
        for _ in range(sims):
            series = 100 + rng.normal(size=n) + np.where(np.arange(n) >= at, k, 0.0)
            hits += at in [c.index for c in method.detect(series).change_points]
        out[k] = hits / sims
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--n", type=int, nargs="+", default=[10, 20, 40])
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    method = EDivisive(alpha=args.alpha)
    steps = [0.5, 1.0, 2.0, 3.0]
    print(f"E-divisive, alpha {args.alpha}, {method.permutations} permutations; {args.sims} series per cell")
    print(f"{'sessions':>8}  " + "  ".join(f"{k:>20}" for k in NOISE) + "  "
          + "  ".join(f"{f'step {k:g} sd':>12}" for k in steps) + "  seconds")
    for n in args.n:
        started = time.perf_counter()
        fa = false_alarms(method, n, args.sims, seed=n)
        pw = power(method, n, steps, max(1, args.sims // 5), seed=1000 + n)
        print(f"{n:>8}  " + "  ".join(f"{fa[k]:>20.3f}" for k in NOISE) + "  "
              + "  ".join(f"{pw[k]:>12.2f}" for k in steps) + f"  {time.perf_counter() - started:7.1f}")
    print("first columns: share of series without a change given a change point (target <= alpha);")
    print("step columns: share of series with one step in the middle where it is found at its place.")


if __name__ == "__main__":
    main()
