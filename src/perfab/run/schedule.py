"""A session as one schedule of events: what ``perfab plan`` prints, preflight checks and the runner executes.

The events, in the order a session meets them:

- ``Build``: a side checked out and built from source, before the session is stored;
- ``WorkloadSetup`` / ``WorkloadTeardown``: a workload's own commands around its stretch of runs;
- ``EnterCell`` / ``LeaveCell``: a side's setup and the workload's service, started with that
  side's placeholders, around the consecutive runs of one cell (workload, side, sweep point);
- ``Run``: one planned run (``perfab.plan.PlannedRun``);
- ``Look``: a sequential experiment's look after a block: the session stops there, or the
  schedule grows by the next block's events and one more look.

The runs come from the plan (``perfab.plan``), computed once per opening of a session: a fixed
experiment schedules it whole, a sequential one its first ``min_runs`` per side and then, look
by look, one block at a time (``Blocks``), never more than ``max_runs`` per side.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfab.plan import PlannedRun, block_of, blocks_for, first_blocks, make_plan, sweep_points
from perfab.specfile import Experiment

Cell = tuple[str, str, tuple]  # (workload, side, sweep point): what a side's setup and service belong to


@dataclass(frozen=True)
class Build:
    """A side checked out and built from source before anything is stored."""

    source: object  # perfab.run.build.Source: the side, its commit and build command


@dataclass(frozen=True)
class WorkloadSetup:
    """A workload's own setup commands, before its stretch of runs."""

    workload: str  # workload name
    side: str  # the side of the stretch's first run: its environment runs the commands
    runs: int  # runs in the stretch (warm-ups too), for progress


@dataclass(frozen=True)
class WorkloadTeardown:
    """A workload's own teardown commands, after its stretch of runs."""

    workload: str  # workload name


@dataclass(frozen=True)
class EnterCell:
    """The side's setup, then the workload's service started for that side and sweep point."""

    cell: Cell  # (workload, side, sweep point)


@dataclass(frozen=True)
class LeaveCell:
    """The cell's service stopped, then the side's teardown."""

    cell: Cell  # (workload, side, sweep point)


@dataclass(frozen=True)
class Run:
    """One planned run."""

    planned: PlannedRun  # what to run, where it stands in the stored plan


@dataclass(frozen=True)
class Look:
    """A sequential experiment's look: stop when the rows are decided, else schedule the next block."""

    block: int  # the last block run before this look


Event = Build | WorkloadSetup | WorkloadTeardown | EnterCell | LeaveCell | Run | Look


def stretch(runs: list[PlannedRun]) -> list[Event]:
    """The events of runs in plan order: each workload's setup and teardown, each cell's enter and leave."""
    out: list[Event] = []
    for i, p in enumerate(runs):
        before = runs[i - 1] if i else None
        if before is None or _cell(before) != _cell(p):
            if before is not None:
                out.append(LeaveCell(_cell(before)))
            if before is None or before.workload != p.workload:
                if before is not None:
                    out.append(WorkloadTeardown(before.workload))
                out.append(WorkloadSetup(p.workload, p.variant, _stretch_len(runs, i)))
            out.append(EnterCell(_cell(p)))
        out.append(Run(p))
    if runs:
        out += [LeaveCell(_cell(runs[-1])), WorkloadTeardown(runs[-1].workload)]
    return out


def _cell(p: PlannedRun) -> Cell:
    return (p.workload, p.variant, p.params)


def _stretch_len(runs: list[PlannedRun], start: int) -> int:
    """Consecutive runs of ``runs[start]``'s workload from ``start``."""
    end = start
    while end < len(runs) and runs[end].workload == runs[start].workload:
        end += 1
    return end - start


class Blocks:
    """The blocks a sequential session may still add, cut from its whole plan (computed once)."""

    def __init__(self, whole: list[PlannedRun], stored: list[PlannedRun]):
        self.whole = whole  # every run up to max_runs per side, in plan order
        self.last = max((p.block for p in stored if not p.warmup), default=-1)  # newest block stored
        self.next_seq = max((p.seq for p in stored), default=-1) + 1  # the next block's first seq

    def next(self) -> list[PlannedRun]:
        """The runs of the block after the newest stored one, numbered on; [] past max_runs."""
        more = block_of(self.whole, self.last + 1, self.next_seq)
        if more:
            self.last, self.next_seq = self.last + 1, self.next_seq + len(more)
        return more


class Schedule:
    """A session's events in order; a sequential one grows by one block at each look."""

    def __init__(self, events: list[Event], blocks: Blocks | None = None):
        self.events = list(events)  # in the order they happen
        self.blocks = blocks  # where more runs come from at a look; None for a fixed experiment
        self._runs: list[PlannedRun] | None = None  # ``runs()``, until the schedule grows

    def __iter__(self):
        """The events, those appended while iterating too."""
        i = 0
        while i < len(self.events):
            yield self.events[i]
            i += 1

    def runs(self) -> list[PlannedRun]:
        """The planned runs scheduled so far (a new list; a session asks several times before it runs)."""
        if self._runs is None:
            self._runs = [e.planned for e in self.events if isinstance(e, Run)]
        return list(self._runs)

    def builds(self) -> dict:
        """Side name -> ``perfab.run.build.Source`` of the sides built from source."""
        return {e.source.variant: e.source for e in self.events if isinstance(e, Build)}

    def extend(self) -> list[PlannedRun]:
        """Append the next block's events and a look after them; its runs ([] when none is left)."""
        more = self.blocks.next() if self.blocks is not None else []
        if more:
            self.events += stretch(more) + [Look(self.blocks.last)]
            self._runs = None
        return more

    def possible(self) -> "Schedule":
        """A copy extended at every look, as far as max_runs allows: everything the session may run."""
        whole = Schedule(self.events, None if self.blocks is None else Blocks(self.blocks.whole, self.runs()))
        while whole.extend():
            pass
        return whole

    def cells(self, exp: Experiment) -> list[Cell]:
        """Every cell this schedule may enter, later blocks' too, in spec order (workload, side, point)."""
        runs = self.runs() + (self.blocks.whole if self.blocks is not None else [])
        present = {_cell(p) for p in runs}
        return [(w.name, v.name, point) for w in exp.workloads for v in exp.variants for point in sweep_points(w)
                if (w.name, v.name, point) in present]


def new_schedule(exp: Experiment, sides: list[str] | None, n_groups: int, sources: dict) -> Schedule:
    """A new session's schedule: the builds, then the whole plan, or a sequential plan's first blocks and a look."""
    builds: list[Event] = [Build(s) for s in sources.values()]
    whole = make_plan(exp, sides, n_groups)
    if exp.sequential is None:
        return Schedule(builds + stretch(whole))
    first = first_blocks(whole, blocks_for(exp, exp.sequential.min_runs))
    blocks = Blocks(whole, first)
    return Schedule(builds + stretch(first) + [Look(blocks.last)], blocks)


def resumed_schedule(exp: Experiment, side: str | None, n_groups: int, sources: dict,
                     remaining: list[PlannedRun], stored: list[PlannedRun]) -> Schedule:
    """A resumed session's schedule: the builds, the runs left, and for a sequential one a look after them."""
    builds: list[Event] = [Build(s) for s in sources.values()]
    if exp.sequential is None:
        return Schedule(builds + stretch(remaining))
    blocks = Blocks(make_plan(exp, [side] if side else None, n_groups), stored)
    return Schedule(builds + stretch(remaining) + [Look(blocks.last)], blocks)
