"""Stage 2: the run plan, the order in which every run will happen.

The default order, ``interleaved``, cuts each side's runs into blocks and
runs every block as a palindrome of a seeded random permutation of the
sides: ``ABBA`` or ``BAAB`` for two sides, ``ACBBCA`` for three.  A linear
drift in the machine (thermal, background load, page cache) then adds the
same amount to every side within a block and cancels from the comparison;
the random choice of each block's permutation keeps a periodic disturbance
from lining up with one side.  This is the classic counterbalanced design
(e.g. Kirk, *Experimental Design*, 4th ed., 2013, ch. 12 on ABBA designs).

Counter groups (``perf`` with more events than PMU counters) are assigned
per block, so within a block every side carries the same group and each
group is spread evenly over time and over sides.

Warm-up runs (``warmup`` per side and workload) come first and are never
analysed.  The plan is a pure function of the spec, the side(s) this
session may run and the groups: the store keeps it before running, and
``--resume`` continues it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from perfab.spec import Experiment


@dataclass(frozen=True)
class PlannedRun:
    """One run to perform."""

    seq: int  # position in the session's plan, from 0
    workload: str  # workload name
    variant: str  # variant name
    group: int  # index into the backend's counter groups
    warmup: bool  # an unmeasured warm-up run
    block: int  # interleaving block, -1 for warm-ups


def make_plan(exp: Experiment, sides: list[str] | None = None, n_groups: int = 1) -> list[PlannedRun]:
    """Plan every run of ``exp`` for ``sides`` (default: all variants)."""
    sides = list(sides or [v.name for v in exp.variants])
    rng = random.Random(exp.seed)
    plan: list[PlannedRun] = []
    for workload in exp.workloads:
        for side in sides:
            for _ in range(exp.warmup):
                plan.append(PlannedRun(len(plan), workload.name, side, 0, True, -1))
        for block, (side, group) in _measured_order(exp, sides, n_groups, rng):
            plan.append(PlannedRun(len(plan), workload.name, side, group, False, block))
    return plan


def _measured_order(exp: Experiment, sides: list[str], n_groups: int, rng: random.Random):
    """Yield (block, (side, group)) for the measured runs of one workload."""
    runs = exp.runs
    if exp.order == "sequential":
        for side in sides:
            for i in range(runs):
                yield i // 2, (side, (i // 2) % n_groups)
        return
    if exp.order == "random":
        slots = [(side, i) for side in sides for i in range(runs)]
        rng.shuffle(slots)
        for side, i in slots:
            yield i // 2, (side, (i // 2) % n_groups)
        return
    block = 0
    done = 0
    while done < runs:
        group = block % n_groups
        if exp.order == "alternate":
            yield from ((block, (s, group)) for s in sides)
            done += 1
        else:
            perm = sides[:]
            rng.shuffle(perm)
            take = min(2, runs - done)
            seq = perm + perm[::-1] if take == 2 else perm
            yield from ((block, (s, group)) for s in seq)
            done += take
        block += 1


def describe_order(exp: Experiment) -> str:
    """A phrase for the report's SETUP block."""
    return {
        "interleaved": f"interleaved ABBA/BAAB blocks, seed {exp.seed}",
        "alternate": "alternating ABAB",
        "sequential": "sequential (all of one side, then the next)",
        "random": f"random, seed {exp.seed}",
    }[exp.order]
