"""Cross-check perfab's E-divisive against MongoDB's signal-processing-algorithms on the same series.

signal-processing-algorithms pins numpy<2 (and gevent), so it cannot live
in perfab's environment: it runs in a throwaway venv under /tmp, never a
dependency of perfab:

    python3 -m venv /tmp/spa-venv
    /tmp/spa-venv/bin/pip install signal-processing-algorithms==2.1.6
    .venv/bin/python bench/history_crosscheck.py [--spa-python /tmp/spa-venv/bin/python] [--real] [--sims 100]

Prints, per seeded series, the change points each implementation finds
(perfab's with their p-values; the library returns positions only), then
how often the two agree over ``--sims`` random series with a step of
random size and place.  ``--real`` also records a real history on this
machine (12 sessions of the bundled lockbench, the last 6 doing half as
much work again) and compares both on its session medians of wall time.

Known differences of definition: the library scales within-sample sums by
n^2 (V-statistics) where the paper divides by C(n, 2), searches only the
split point (no right end kappa), allows one-value segments, and counts
its p-value as #exceed / (R + 1); perfab follows the paper (U-statistics,
kappa, at least 2 values a side) and counts (1 + #exceed) / (R + 1).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from perfab.analyse.edivisive import EDivisive  # noqa: E402

PERMUTATIONS, ALPHA, SEED = 199, 0.05, 1

# Runs in the throwaway venv: reads {"series": [...], ...} on stdin, prints each series' change points.
LIBRARY = """
import json, sys
import numpy as np
from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
job = json.load(sys.stdin)
out = []
for s in job["series"]:
    np.random.seed(job["seed"])
    out.append(sorted(int(i) for i in e_divisive(s, pvalue=job["alpha"], permutations=job["permutations"])))
print(json.dumps(out))
"""


def named_series() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    step_outliers = np.r_[100 + rng.standard_t(3, 20), 87 + rng.standard_t(3, 20)]
    step_outliers[[4, 11, 31]] += [25, -30, 40]
    flat_outliers = 100 + rng.normal(size=30)
    flat_outliers[[6, 21]] += [15, -12]
    return {
        "one step -13%, 1% noise": np.r_[100 + rng.normal(size=12), 87 + rng.normal(size=12)],
        "two steps +10%, -14%": np.r_[100 + rng.normal(size=10), 110 + rng.normal(size=10),
                                      95 + rng.normal(size=10)],
        "step -13%, t3 noise, outliers": step_outliers,
        "small step (1 sd), 20+20": np.r_[100 + rng.normal(size=20), 99 + rng.normal(size=20)],
        "deterministic counts, step": np.r_[np.full(6, 5e6), np.full(6, 5.4e6)],
        "no change, normal noise": 100 + rng.normal(size=30),
        "no change, two outliers": flat_outliers,
        "no change, newest outlying": np.r_[100 + rng.normal(size=15), 80.0],
    }


def perfab_points(series: np.ndarray) -> list[tuple[int, float]]:
    d = EDivisive(alpha=ALPHA, permutations=PERMUTATIONS, seed=SEED).detect(series)
    return [(c.index, c.p) for c in d.change_points]


def library_points(python: str, series: list[np.ndarray]) -> list[list[int]]:
    job = {"series": [s.tolist() for s in series], "alpha": ALPHA, "permutations": PERMUTATIONS, "seed": SEED}
    done = subprocess.run([python, "-c", LIBRARY], input=json.dumps(job), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"signal-processing-algorithms failed under {python}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def random_series(sims: int) -> list[tuple[int | None, np.ndarray]]:
    """(true change position or None, series): half without a change, half with a step of 0.5-4 sd."""
    rng = np.random.default_rng(99)
    out = []
    for i in range(sims):
        n = int(rng.integers(12, 41))
        noise = rng.normal(size=n)
        if i % 2 == 0:
            out.append((None, 100 + noise))
            continue
        at = int(rng.integers(3, n - 2))
        size = rng.uniform(0.5, 4) * rng.choice([-1, 1])
        out.append((at, 100 + noise + np.where(np.arange(n) >= at, size, 0.0)))
    return out


def real_history(runs: int = 5) -> np.ndarray:
    """Session medians of wall time from 12 real sessions of lockbench: 3,000,000 lock/unlock pairs in the
    first 6, 4,500,000 in the last 6 (half as much work again: a real step in this machine's real noise)."""
    from perfab.analyse.history import history
    from perfab.machine import snapshot
    from perfab.run.backends import TimeBackend
    from perfab.run.executor import RealExecutor
    from perfab.run.runner import Runner
    from perfab.specfile import parse_spec
    from perfab.store import Store

    subprocess.run(["make", "-s", "-C", str(ROOT), "workloads"], check=True)
    spec = ('[experiment]\nname = "lock-history"\nruns = {runs}\nwarmup = 1\npin = "1"\n\n[[variant]]\n'
            'name = "build"\nvars = {{ ops = "{ops}" }}\n\n[[workload]]\nname = "lockbench"\n'
            'argv = ["{root}/build/outline/lockbench", "{{ops}}"]\nparser = "keyvalue"\n')
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "r.db") as store:
        for i in range(12):
            text = spec.format(runs=runs, ops=3_000_000 if i < 6 else 4_500_000, root=ROOT)
            Runner(parse_spec(text, "lock-history.toml"), store, TimeBackend(), RealExecutor(), snapshot()).run()
        (series,) = history(store, "lock-history", metrics=["wall_s"]).series
        return np.array([p.median for p in series.points])


def _fmt(points) -> str:
    return ", ".join(f"{i} (p {p:.3f})" if p is not None else str(i) for i, p in points) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spa-python", default="/tmp/spa-venv/bin/python")
    ap.add_argument("--sims", type=int, default=100)
    ap.add_argument("--real", action="store_true", help="also record and compare a real 12-session history")
    args = ap.parse_args()
    if not Path(args.spa_python).exists():
        sys.exit(f"{args.spa_python}: missing; make the throwaway venv first (see this script's docstring)")
    named = named_series()
    if args.real:
        named["real: lockbench wall s, 3M x6, 4.5M x6"] = real_history()
    theirs = library_points(args.spa_python, list(named.values()))
    print(f"E-divisive, alpha {ALPHA}, {PERMUTATIONS} permutations, seed {SEED}: change points (first index after)")
    print(f"{'series':<38} {'n':>3}  {'perfab':<28} signal-processing-algorithms")
    for (name, series), other in zip(named.items(), theirs):
        print(f"{name:<38} {len(series):>3}  {_fmt(perfab_points(series)):<28} {_fmt((i, None) for i in other)}")
    if args.real:
        print("real session medians (s):", ", ".join(f"{v:.4f}" for v in named[list(named)[-1]]))
    sims = random_series(args.sims)
    theirs = library_points(args.spa_python, [s for _, s in sims])
    ours = [[i for i, _ in perfab_points(s)] for _, s in sims]
    same = sum(a == b for a, b in zip(ours, theirs))
    print(f"\n{args.sims} random series (half without a change, half one step of 0.5-4 sd at a random place):")
    print(f"  identical change points: {same}/{args.sims}")
    for label, pick in (("without a change", lambda t: t is None), ("with one step", lambda t: t is not None)):
        rows = [(t, a, b) for (t, _), a, b in zip(sims, ours, theirs) if pick(t)]
        for who, k in (("perfab", 1), ("library", 2)):
            any_found = sum(bool(r[k]) for r in rows)
            exact = sum(r[0] is not None and r[0] in r[k] for r in rows)
            where = f", the true place among them in {exact}" if label == "with one step" else ""
            print(f"  {label:<17} {who:<8} found a change in {any_found}/{len(rows)}{where}")


if __name__ == "__main__":
    main()
