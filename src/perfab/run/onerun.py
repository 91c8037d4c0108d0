"""One planned run, executed and read: the ``Run`` event of a session's schedule.

The command is the workload's argv with the run's placeholders, behind the
side's ``wrap`` prefix (with the rusage shim when a wrapper may fork) and
then the backend's wrapper.  It runs in a scratch directory emptied after
each run that wrote to it; the backend reads its readings there, the
workload's parser its output, and a profile recorder its samples when the
spec asks for them.  The command, working directory and padded environment
are the same for every run of a cell (side, workload, sweep point): they are
worked out at its first run (``_Cell``), so a run pays for little beyond its
execution and its record.  With ``layout = "random"`` (a layout check's
aligned pair) each run adds its own random padding to that environment.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from perfab.errors import PerfabError
from perfab.machine.busy import BusyMeter
from perfab.plan import PlannedRun
from perfab.replication import BUILD, RUN, Draw, Replication
from perfab.run.around import Around
from perfab.run.backends import Backend
from perfab.run.context import SideContext
from perfab.run.executor import Executor
from perfab.run.layout import Padding, random_extra, with_extra
from perfab.run.readings import record, rusage_readings
from perfab.run.sides import Sides
from perfab.run.trampoline import read_rusage, rusage_shim
from perfab.specfile import Experiment, Variant, Workload, expand
from perfab.store import RunRecord


@dataclass(frozen=True)
class _Cell:
    """What every run of one cell executes."""

    argv: list[str]  # the side's wrap, the rusage shim when it applies, the workload with its placeholders
    shim: list[str] | None  # the rusage shim's command when the wrap may fork, else None
    cwd: str | None  # the working directory, None for perfab's own
    env: dict[str, str]  # the side's environment padded to the widest side's bytes (``perfab.run.layout``)
    values: dict[str, str]  # the cell's placeholder values


class OneRun:
    """Executes one planned run in its cell's context and returns its record (not yet stored)."""

    def __init__(self, exp: Experiment, backend: Backend, executor: Executor, sides: Sides, cpus: set[int] | None,
                 real: bool):
        self.exp, self.backend, self.executor, self.sides = exp, backend, executor, sides
        self.groups = backend.groups()  # counter groups, indexed by PlannedRun.group
        self.cpus = cpus  # experiment.pin, checked
        self.real = real  # the executor runs real programs (rusage shims apply)
        self.recorder = _recorder(exp)  # perf record around each run, when the spec asks for profiles
        self.padding = Padding(exp.variants)  # equal argv and environment bytes on every side
        self.replication = Replication(RUN, 1, 0)  # the session's (the runner sets it): its draws and boots
        self.window = None  # the machine's CPU counters around the last run (``Execution.window``)
        self._cells: dict[tuple, _Cell] = {}  # (side, workload, sweep point) -> its command, for ``_root``
        self._root: Path | None = None  # the session's scratch root the cells were worked out for
        self._scratch: Path | None = None  # ``_root / "run"``, None while it does not exist

    def measured(self, planned: PlannedRun, workload: Workload, variant: Variant, parse, scratch_root: Path,
                 ctx: SideContext, busy: BusyMeter | None) -> RunRecord:
        """One run, with other work on the machine over its window summed (``perfab.machine.busy``: the
        executor reads the window's ends around the run)."""
        self.window = None
        rec = self.run(planned, workload, variant, parse, scratch_root, ctx)
        if busy is not None:
            busy.add(self.window, _run_cpu_s(rec))
        return rec

    def run(self, planned: PlannedRun, workload: Workload, variant: Variant, parse, scratch_root: Path,
            ctx: SideContext) -> RunRecord:
        """Execute the run and read it; a service that is gone makes it a failed run that never started."""
        group = self.groups[planned.group]
        scratch = self._scratch_dir(scratch_root)  # one directory, emptied after each run that wrote to it
        cell = self._cell(planned, workload, variant, scratch)
        started = time.time()
        if (problem := ctx.service_problem()) is not None:
            return _not_run(started, problem)
        draw = self.replication.draw(planned.workload, planned.params, planned.rep)
        backend = self.backend.for_side(variant, workload).for_run(cell.values, ctx.service_spec(), draw)
        counter = self._service_counter(ctx, group, scratch)
        around = Around(self.exp, ctx, counter, not backend.own_interrupts)
        if (problem := around.start()) is not None:
            return _not_run(started, problem)
        # Only a wrapper, the rusage shim, a profile, the service's counters or the stderr tail write there.
        writes = backend.wraps_workload or backend.stderr_file or cell.shim or self.recorder or counter
        try:
            inner = self.recorder.wrap(cell.argv, scratch) if self.recorder else cell.argv
            ex = self.executor.execute(backend.wrap(inner, scratch, group), self._env(cell, planned, draw), cell.cwd,
                                       workload.timeout_s, self.exp.stdout_cap_bytes, self.cpus)
            self.window = ex.window
            measurement = self._measurement(backend, ex, scratch, group)
            own_rusage = _shim_rusage(scratch / "rusage") if cell.shim else None
        finally:
            around.stop_counting()
            if writes and os.listdir(scratch):
                shutil.rmtree(scratch, ignore_errors=True)  # the next run recreates it
                self._scratch = None
        return around.finish(record(ex, started, measurement, parse, backend, workload, own_rusage), backend,
                             measurement)

    def _env(self, cell: _Cell, planned: PlannedRun, draw: Draw | None) -> dict[str, str]:
        """The cell's padded environment, plus the run's perturbation (``perfab.replication``: the same pad for run
        k of every side), or with layout = "random" a random draw per run (``perfab.run.layout``): the stack starts
        at a different offset in every run."""
        if draw is not None:
            return with_extra(cell.env, draw.run.pad)
        if self.exp.layout != "random":
            return cell.env
        return with_extra(cell.env, random_extra(self.exp.seed, planned.seq))

    def _scratch_dir(self, root: Path) -> Path:
        """``root / "run"``, created when it does not exist; a new root (session) forgets the cells."""
        if root is not self._root:
            self._root, self._scratch, self._cells = root, None, {}
        if self._scratch is None:
            self._scratch = root / "run"
            self._scratch.mkdir(exist_ok=True)
        return self._scratch

    def _cell(self, planned: PlannedRun, workload: Workload, variant: Variant, scratch: Path) -> _Cell:
        """The command of ``planned``'s cell, worked out at its first run."""
        build = self.replication.unit_of(planned.rep) if self.replication.unit == BUILD else 0  # its layout build
        key = (variant.name, workload.name, planned.params, build)
        cell = self._cells.get(key)
        if cell is None:
            values = self.sides.values(variant, workload, planned.params, build)
            argv, shim = self._argv(workload, variant, values, scratch)
            cwd = self.sides.cwd(workload, values)
            env = self.padding.env(variant, workload, planned.params, cwd,
                                   lambda v: self.sides.values(v, workload, planned.params, build), self.sides.env,
                                   build)
            cell = self._cells[key] = _Cell(argv, shim, cwd, env, values)
        return cell

    def _argv(self, workload: Workload, variant: Variant, values: dict[str, str], scratch: Path):
        """The command: the side's wrap, the workload's rusage shim when a wrap may fork, the workload."""
        argv = [expand(a, values, f"workload {workload.name!r} argv") for a in workload.argv]
        if workload.shell:
            argv = ["/bin/sh", "-c", argv[0]]
        shim = None
        if variant.wrap and self.real and not self.backend.wraps_workload:  # a wrapper may fork: rusage inside it
            shim = rusage_shim(argv, scratch / "rusage")
            argv = shim or argv
        return [expand(a, values) for a in variant.wrap] + argv, shim

    def _measurement(self, backend: Backend, ex, scratch: Path, group: tuple[str, ...]):
        """The backend's readings (and the profile's) for an execution that started."""
        if ex.error is not None:
            return None
        if ex.stderr_tail and backend.stderr_file:
            (scratch / backend.stderr_file).write_bytes(ex.stderr_tail)  # the tool's last words (a signal death)
        measurement = backend.collect(scratch, group, ex.status)
        if self.recorder and ex.status == 0:
            measurement = _with_profile(measurement, self.recorder, scratch)
        return measurement

    def _service_counter(self, ctx: SideContext, group: tuple[str, ...], scratch: Path):
        """The backend's counting of the service (its pids or its CPUs) for this run, when the spec asks for it."""
        svc = ctx.workload.service
        if ctx.service is None or svc is None or not svc.counters:
            return None
        pids = ctx.service.tree.pids() if ctx.service.tree is not None else []
        return self.backend.service_counter(group, scratch, pids, svc.cpus if svc.counters == "cpus" else None)


def _run_cpu_s(rec: RunRecord) -> float | None:
    """The CPU time a run used: the measured command's (wait4 rusage) and its service's; None if unknown."""
    if rec.user_s is None or rec.sys_s is None:
        return None
    return rec.user_s + rec.sys_s + rec.metrics.get("service_cpu_s", 0.0)


def _shim_rusage(path: Path) -> dict | None:
    """The workload's own rusage read by perfab-exec --rusage-out inside a wrapper, as rusage metrics."""
    report = read_rusage(path)
    return None if report is None else rusage_readings(partial(getattr, report))


def _not_run(started: float, reason: str) -> RunRecord:
    """A failed run that never started (its service is gone)."""
    return RunRecord("failed", reason, started, None, None, None, None, None, None, None, None, False, b"", b"", 0, 0)


def _recorder(exp: Experiment):
    """A perf record wrapper when the spec asks for profiles."""
    if not exp.measure.profile:
        return None
    from perfab.profile import ProfileRecorder

    return ProfileRecorder(exp.measure.profile_event, exp.measure.profile_freq)


def _with_profile(measurement, recorder, scratch: Path):
    """Add the run's per-symbol self shares to the backend's readings (stored apart from the metrics)."""
    try:
        shares = recorder.collect(scratch)
    except PerfabError as e:
        return replace(measurement, failure=measurement.failure or f"profile: {e}")
    return replace(measurement, profile=shares)
