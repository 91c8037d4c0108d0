"""Sequential experiments: false `**` under monitoring, early `flat`, and runs needed, fixed vs sequential.

Every simulated report draws both sides' runs, looks after every block
(2 runs per side) from ``min_runs`` to ``max_runs`` and stops when every
row is decided (``perfab.analyse.sequential.replay``: exactly what a runner
calling ``decide`` after each block reaches).  Printed side by side:

1. A/A, false `**` per report: this machine's recorded noise (``_noise``,
   as ``aa_calibration.py`` records it; ``--db`` reuses a recording), t
   with 3 d.f. and a lognormal right tail, each at a robust CV of 1%;
   the fixed test once at ``max_runs``, the same fixed test redone after
   every block (stopping at the first `**`), and the sequential rule.
2. A/A at low noise: how often and how early the sequential rule stops `flat`.
3. A +1% change at 1% noise, margin 0.1%: the fixed n with 80% power and
   the sequential design (smallest ``max_runs`` with 80% power) with its
   mean runs per side; alone and as the primary row of a 10-row report.
4. The README table: effect x noise -> runs per side for 80% power.

    .venv/bin/python bench/sequential_runs.py [--db PATH] [--reports 2000] [--sims 2000] [--table-sims 400]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from _noise import noise, record

from perfab.analyse.checks import adjust
from perfab.analyse.compare import verdict
from perfab.analyse.methods import AssumeNothing, relative_cv
from perfab.analyse.rci import look
from perfab.analyse.sequential import Design, SequentialRow, replay

ALPHA, MARGIN = 0.05, 0.001


def sampler(kind: str, cv: float):
    """Multiplicative per-run noise around 1 with robust CV ``cv`` (1.4826 MAD / median)."""
    if kind == "normal":
        return lambda rng, n: np.exp(rng.normal(0.0, cv, n))
    if kind == "t3":
        return lambda rng, n: np.exp(cv / 1.1340 * rng.standard_t(3, n))  # 1.4826 * MAD(t3) = 1.1340
    if kind == "lognormal-tail":
        scale = cv / 0.88776  # 1.4826 * MAD of LogNormal(0, 1) about its median 1
        return lambda rng, n: 1.0 + scale * (rng.lognormal(0.0, 1.0, n) - 1.0)
    raise ValueError(kind)


def recorded(pool: dict):
    return [lambda rng, n, v=v: rng.choice(v, n) / np.median(v) for v in pool.values()]


def report(rng, samplers, n: int, shifts) -> list[SequentialRow]:
    return [SequentialRow(i, tuple(s(rng, n)), tuple(s(rng, n) * (1 + d)), MARGIN, primary=(d != 0))
            for i, (s, d) in enumerate(zip(samplers, shifts))]


def fixed_stars(rows, n: int) -> list[bool]:
    """perfab's fixed verdicts at n runs per side: rank test, BH across the rows, margin."""
    ests = [AssumeNothing().compare(np.array(r.base[:n]), np.array(r.exp[:n]), 1 - ALPHA) for r in rows]
    qs = adjust([e.p for e in ests], "bh")
    return [verdict(e, r.margin, q, ALPHA) == "**" for e, r, q in zip(ests, rows, qs)]


def peeking_stars(rows, design: Design) -> tuple[bool, bool]:
    """(a false ** of the fixed test at max_runs only, of the fixed test redone after every block).

    The fixed test at a look: the 95% rank interval beyond the margin and
    BH across the rows on the margin test's p-values (perfab's fixed
    verdict with the margin in the p-value, so if anything stricter).
    """
    stars = []
    for n in design.schedule(design.max_runs):
        looks = [look(np.array(r.base[:n]), np.array(r.exp[:n]), r.margin, ALPHA, 1.0) for r in rows]
        qs = adjust([lk.pi for lk in looks], "bh")
        stars.append(any(q <= ALPHA and (lk.lo > MARGIN or lk.hi < -MARGIN) for lk, q in zip(looks, qs)))
    return stars[-1], any(stars)


def aa_section(pool: dict, reports: int, design: Design) -> None:
    print(f"\n1. A/A, a look after every block ({design.min_runs}..{design.max_runs} runs per side, "
          f"{len(design.schedule(design.max_runs))} looks), margin {100 * MARGIN:g}%, alpha {ALPHA}, "
          f"{reports} reports each; fraction of reports with a false **")
    print(f"   {'noise':<28}{'rows':>5}{'fixed once':>12}{'peeking':>10}{'sequential':>12}"
          f"{'seq. rows **':>14}{'seq. runs/side':>16}")
    cases = [("recorded on this machine", recorded(pool))] + [
        (f"{kind}, CV 1%", [sampler(kind, 0.01)] * 10) for kind in ("t3", "lognormal-tail", "normal")]
    for seed, (name, samplers) in enumerate(cases):
        rng = np.random.default_rng(100 + seed)
        once = peek = seq = seq_rows = runs = 0
        for _ in range(reports):
            rows = report(rng, samplers, design.max_runs, [0.0] * len(samplers))
            fixed, peeked = peeking_stars(rows, design)
            once, peek = once + fixed, peek + peeked
            d = replay(rows, replace(design, stop_on="all"), estimates=False)
            stars = sum(r.state == "**" for r in d.rows)
            seq, seq_rows, runs = seq + (stars > 0), seq_rows + stars, runs + d.runs_per_side
        print(f"   {name:<28}{len(samplers):>5}{once / reports:>12.3f}{peek / reports:>10.3f}{seq / reports:>12.3f}"
              f"{seq_rows / reports / len(samplers):>14.4f}{runs / reports:>16.1f}")
    print("   fixed: the 95% rank interval beyond the margin and BH on the margin test's p-values, once at max_runs"
          "\n   (fixed once) or after every block, stopping at the first ** (peeking)")


def flat_section(sims: int) -> None:
    design = Design(min_runs=6, max_runs=40, stop_on="all")
    print(f"\n2. A/A at low noise, one row, looks {design.min_runs}..{design.max_runs}: sequential stops flat early "
          f"({sims} experiments each; fixed: flat at n = {design.max_runs})")
    print(f"   {'noise CV':>9}{'margin':>8}{'seq. flat':>11}{'seq. runs/side':>16}{'fixed flat':>12}")
    for cv, margin in ((0.0025, 0.005), (0.005, 0.005), (0.005, 0.01), (0.01, 0.01), (0.01, 0.02)):
        rng = np.random.default_rng(int(cv * 1e5 + margin * 1e3))
        flat = runs = fixed = 0
        for _ in range(sims):
            s = sampler("normal", cv)
            row = SequentialRow(0, tuple(s(rng, 40)), tuple(s(rng, 40)), margin)
            d = replay([row], design, estimates=False)
            flat, runs = flat + (d.rows[0].state == "flat"), runs + d.runs_per_side
            e = AssumeNothing().compare(np.array(row.base), np.array(row.exp), 0.95)
            fixed += verdict(e, margin, e.p, ALPHA) == "flat"
        print(f"   {100 * cv:8.2f}%{100 * margin:7.1f}%{flat / sims:>11.3f}{runs / sims:>16.1f}{fixed / sims:>12.3f}")


def _hit(stars: list[bool], shift_rows) -> bool:
    """A change found in the first row; with no change anywhere, a false ** in any row."""
    return stars[0] if any(shift_rows) else any(stars)


def fixed_power(samplers, shift_rows, n: int, sims: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    return sum(_hit(fixed_stars(report(rng, samplers, n, shift_rows), n), shift_rows) for _ in range(sims)) / sims


def seq_run(samplers, shift_rows, max_runs: int, sims: int, seed: int) -> tuple[float, float]:
    """(power of the first row, or any false ** without a change; mean runs per side) of the design to ``max_runs``."""
    rng, design = np.random.default_rng(seed), Design(min_runs=6, max_runs=max_runs)
    hits = runs = 0
    for _ in range(sims):
        d = replay(report(rng, samplers, max_runs, shift_rows), design, estimates=False)
        hits += _hit([r.state == "**" for r in d.rows], shift_rows)
        runs += d.runs_per_side
    return hits / sims, runs / sims


def smallest(ok, lo: int, hi: int) -> int | None:
    """The smallest even n in [lo, hi] with ok(n) (ok is monotone up to simulation noise), by bisection."""
    if not ok(hi):
        return None
    while hi - lo > 2:
        mid = (lo + hi) // 4 * 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return lo if ok(lo) else hi


def design_pair(samplers, shifts, sims: int, cap: int, seed: int):
    """Fixed n and sequential max_runs with 80% power, with power, mean runs and A/A error of each."""
    n = smallest(lambda k: fixed_power(samplers, shifts, k, sims, seed) >= 0.8, 4, cap)
    m = smallest(lambda k: seq_run(samplers, shifts, k, sims, seed)[0] >= 0.8, 6, cap)
    null = [0.0] * len(shifts)
    fixed = (n, fixed_power(samplers, shifts, n, sims, seed), fixed_power(samplers, null, n, sims, seed + 1)) \
        if n else None
    seq = (m, *seq_run(samplers, shifts, m, sims, seed), seq_run(samplers, null, m, sims, seed + 1)[0]) if m else None
    return fixed, seq


def power_section(sims: int) -> None:
    print(f"\n3. A +1% change at 1% noise (normal, robust CV), margin {100 * MARGIN:g}%, 80% power, {sims} simulations"
          " per design; A/A error of the same design")
    s = sampler("normal", 0.01)
    for label, samplers, shifts in (("alone", [s], [0.01]), ("primary row of a 10-row report", [s] * 10,
                                                             [0.01] + [0.0] * 9)):
        fixed, seq = design_pair(samplers, shifts, sims if len(shifts) == 1 else sims // 4, 80, 31)
        print(f"   {label}:")
        print(f"     fixed:      n = {fixed[0]} per side, power {fixed[1]:.3f}, A/A ** {fixed[2]:.3f}")
        print(f"     sequential: max_runs = {seq[0]}, power {seq[1]:.3f}, mean runs per side {seq[2]:.1f}, "
              f"A/A ** {seq[3]:.3f}  ->  {100 * (1 - seq[2] / fixed[0]):.0f}% fewer runs than fixed")


def table_section(sims: int) -> None:
    print(f"\n4. Runs per side for 80% power (normal noise, margin {100 * MARGIN:g}%, alpha {ALPHA}; {sims} "
          "simulations per design): fixed n vs sequential mean (max_runs), realized power and A/A error")
    print("   | change | noise CV | fixed n | sequential mean (max) | power fixed / seq | A/A ** fixed / seq |")
    print("   |---|---|---|---|---|---|")
    for effect in (0.01, 0.02, 0.05):
        for cv in (0.005, 0.01, 0.02):
            fixed, seq = design_pair([sampler("normal", cv)], [effect], sims, 120, int(effect * 1e4 + cv * 1e5))
            if fixed is None or seq is None:
                print(f"   | {100 * effect:g}% | {100 * cv:g}% | > 120 | > 120 | | |")
                continue
            print(f"   | {100 * effect:g}% | {100 * cv:g}% | {fixed[0]} | {seq[2]:.1f} ({seq[0]}) | "
                  f"{fixed[1]:.2f} / {seq[1]:.2f} | {fixed[2]:.3f} / {seq[3]:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, help="reuse a noise recording (default: record one in a temp dir)")
    ap.add_argument("--runs", type=int, default=30, help="real runs per side to record")
    ap.add_argument("--reports", type=int, default=2000)
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--table-sims", type=int, default=400)
    ap.add_argument("--sections", default="1234", help="which sections to print (each is seeded on its own)")
    args = ap.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="perfab-seq-")) / "aa.db"
    pool = noise(record(db, args.runs))
    print(f"recorded noise: {len(pool)} metrics from {db}, robust CV "
          + ", ".join(f"{k[1]} {100 * relative_cv(v):.1f}%" for k, v in pool.items()))
    sections = {"1": lambda: aa_section(pool, args.reports, Design(min_runs=6, max_runs=30)),
                "2": lambda: flat_section(max(200, args.reports // 4)),
                "3": lambda: power_section(args.sims), "4": lambda: table_section(args.table_sims)}
    for key in args.sections:
        sections[key]()


if __name__ == "__main__":
    main()
