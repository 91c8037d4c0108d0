"""Stage 2: the run plan, the order in which every run will happen.

The default order, ``interleaved``, cuts each cell's runs into blocks and
runs every block as a palindrome of a seeded random permutation of the
cells: ``ABBA`` or ``BAAB`` for two sides, ``ACBBCA`` for three.  A cell is
a side, or a (side, sweep point) pair when the workload declares
parameters, so a sweep interleaves its points as well as its sides.  A
linear drift in the machine (thermal, background load, page cache) then
adds the same amount to every cell within a block and cancels from the
comparison; the random choice of each block's permutation keeps a periodic
disturbance from lining up with one cell.  This is the classic
counterbalanced design (e.g. Kirk, *Experimental Design*, 4th ed., 2013,
ch. 12 on ABBA designs).

Counter groups (``perf`` with more events than PMU counters) are assigned
per block, so within a block every cell carries the same group and each
group is spread evenly over time and over cells.

A sequential experiment (``runs = "auto"``) stores its plan block by block:
the same seeded order, cut after the first ``min_runs`` runs per side and
extended one block at a time while its rows are undecided.

Warm-up runs (``warmup`` per cell) come first and are never analysed.  The
plan is a pure function of the spec, the side(s) this session may run and
the groups: the store keeps it before running, and ``--resume`` continues
it.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the store reads planned runs without loading the spec layer
    from perfab.specfile import Experiment, Workload

Params = tuple[tuple[str, str], ...]  # a sweep point: (parameter, value) pairs in spec order
ORDER_STRIDE = 10_000_000  # a run's position in time across sessions: session * ORDER_STRIDE + plan position


@dataclass(frozen=True)
class PlannedRun:
    """One run to perform."""

    seq: int  # position in the session's plan, from 0
    workload: str  # workload name
    variant: str  # variant name
    group: int  # index into the backend's counter groups
    warmup: bool  # an unmeasured warm-up run
    block: int  # interleaving block, -1 for warm-ups
    params: Params = ()  # the sweep point, () outside sweeps
    rep: int = 0  # place among its cell's measured runs from 0 (warm-ups -1, -2, ...): its boot and perturbation


def sweep_points(workload: Workload) -> list[Params]:
    """Every point of the workload's parameter grid, in spec order (one empty point without parameters)."""
    names = [name for name, _ in workload.params]
    grids = [values for _, values in workload.params]
    return [tuple(zip(names, combo)) for combo in itertools.product(*grids)] if names else [()]


def make_plan(exp: Experiment, sides: list[str] | None = None, n_groups: int = 1) -> list[PlannedRun]:
    """Plan every run of ``exp`` for ``sides`` (default: all variants)."""
    sides = list(sides or [v.name for v in exp.variants])
    rng = random.Random(exp.seed)
    plan: list[PlannedRun] = []
    for workload in exp.workloads:
        points = sweep_points(workload)
        cells = [(side, point) for point in points for side in sides] if len(points) > 1 else \
            [(side, ()) for side in sides]
        for side, point in cells:
            for i in range(exp.warmup):
                plan.append(PlannedRun(len(plan), workload.name, side, 0, True, -1, point, -1 - i))
        reps = dict.fromkeys(cells, 0)
        for block, (cell, group) in _measured_order(exp, cells, n_groups, rng):
            plan.append(PlannedRun(len(plan), workload.name, cell[0], group, False, block, cell[1], reps[cell]))
            reps[cell] += 1
    return plan


def _measured_order(exp: Experiment, cells: list, n_groups: int, rng: random.Random):
    """Yield (block, (cell, group)) for the measured runs of one workload."""
    runs = exp.sequential.max_runs if exp.sequential is not None else exp.runs  # the most a session may run
    if exp.order == "sequential":
        for cell in cells:
            for i in range(runs):
                yield i // 2, (cell, (i // 2) % n_groups)
        return
    if exp.order == "random":
        slots = [(cell, i) for cell in cells for i in range(runs)]
        rng.shuffle(slots)
        for cell, i in slots:
            yield i // 2, (cell, (i // 2) % n_groups)
        return
    block = 0
    done = 0
    while done < runs:
        group = block % n_groups
        if exp.order == "alternate":
            yield from ((block, (c, group)) for c in cells)
            done += 1
        else:
            perm = cells[:]
            rng.shuffle(perm)
            take = min(2, runs - done)
            seq = perm + perm[::-1] if take == 2 else perm
            yield from ((block, (c, group)) for c in seq)
            done += take
        block += 1


def runs_per_block(exp: Experiment) -> int:
    """Measured runs per side in one block: 2 in an ABBA/BAAB block, 1 when alternating."""
    return 1 if exp.order == "alternate" else 2


def blocks_for(exp: Experiment, runs: int) -> int:
    """Blocks needed for ``runs`` measured runs per side."""
    per = runs_per_block(exp)
    return -(-runs // per)


def first_blocks(plan: list[PlannedRun], blocks: int) -> list[PlannedRun]:
    """A sequential experiment's plan so far: warm-ups and the first ``blocks`` blocks, numbered from 0."""
    return renumber([p for p in plan if p.warmup or p.block < blocks], 0)


def block_of(plan: list[PlannedRun], block: int, start_seq: int) -> list[PlannedRun]:
    """The runs of one more block, numbered on from ``start_seq``; [] past the last planned block."""
    return renumber([p for p in plan if not p.warmup and p.block == block], start_seq)


def renumber(runs: list[PlannedRun], start_seq: int) -> list[PlannedRun]:
    from dataclasses import replace

    return [replace(p, seq=start_seq + i) for i, p in enumerate(runs)]


def describe_order(exp: Experiment) -> str:
    """A phrase for the report's SETUP block."""
    return {
        "interleaved": f"interleaved ABBA/BAAB blocks, seed {exp.seed}",
        "alternate": "alternating ABAB",
        "sequential": "sequential (all of one side, then the next)",
        "random": f"random, seed {exp.seed}",
    }[exp.order]
