"""Stage 3: a session's schedule executed event by event, each run stored the moment it ends.

``Runner.run`` is the session's life: ``open_session`` claims it (a new
one, or the unfinished one with ``--resume``), builds its sides, checks
every command of its schedule and stores it (``perfab.run.session``); the
runner then executes the schedule (``perfab.run.schedule``) and releases
the session however it ends.

A workload's setup and teardown surround its stretch of runs; a cell's
``SideContext`` runs the side's setup and starts the workload's service
with that side's placeholders, and stops it again when the schedule
leaves the cell.  Each run is executed and read by ``OneRun`` and stored.
A failed run is stored with its reason, never dropped; when more runs fail
than the policy allows, the session is aborted (stored runs stay).  A run
that failed by a race of the measuring tool itself (perf stat 6.1 losing a
short workload's exit status) is stored and run again at once, up to
twice: the newest attempt counts.  At a sequential experiment's look the
injected stopping test (``stopping``, by default the analysis's) says
whether to stop; if not, the schedule grows by the next block.

Signals: the first SIGINT lets the run in flight finish, stores it and
stops; a second one abandons the run in flight.  SIGTERM and SIGHUP stop at
once, like a second SIGINT.  An abandoned run is stored as
``interrupted`` and ``--resume`` runs it again as a new attempt.  Services
are stopped and the session released either way.
"""

from __future__ import annotations

import shutil
import signal
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from perfab import scratch
from perfab.errors import PerfabError, UsageError
from perfab.machine.busy import BusyMeter
from perfab.plan import PlannedRun
from perfab.run.backends import Backend
from perfab.run.context import SideContext
from perfab.run.executor import Executor
from perfab.run.layout import describe as describe_layout
from perfab.run.onerun import OneRun
from perfab.run.preflight import pinned_cpus
from perfab.run.readings import interrupted
from perfab.run.schedule import (Build, EnterCell, LeaveCell, Look, Run, Schedule, WorkloadSetup,
                                 WorkloadTeardown)
from perfab.run.services import run_shell
from perfab.run.session import OpenSession, Opener, Opening, analysis_stopping, open_session
from perfab.run.sides import Sides
from perfab.specfile import Experiment, Variant, Workload, expand, workload_placeholders
from perfab.store import RunRecord, Store


@dataclass(frozen=True)
class SessionResult:
    """How a session ended."""

    session: int  # session id in the store
    status: str  # finished | interrupted | aborted
    runs_done: int  # runs executed in this invocation
    runs_failed: int  # of which failed
    side: str | None  # external side run, None when all sides ran


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TRANSIENT_RETRIES = 2  # a run failed by a race of the measuring tool (perf stat losing the status) runs again
UNPARSED_ABORT = 3  # runs of one sweep point (warm-ups too) unparsed, none parsed: abort (unless max_failures set)


class _Unparsed:
    """Counts, per workload and sweep point, runs (warm-ups too) whose output the parser could not read."""

    def __init__(self):
        self.failed: dict[tuple, int] = {}  # (workload, point) -> unparsed runs while none parsed
        self.parsed: set[tuple] = set()  # (workload, point) with a run that parsed

    def hopeless(self, planned: PlannedRun, rec: RunRecord) -> bool:
        """True once ``UNPARSED_ABORT`` runs of this run's point failed to parse and none of it parsed."""
        key = (planned.workload, planned.params)
        if rec.status == "ok":
            self.parsed.add(key)
        if key in self.parsed or not (rec.reason or "").startswith("output not parsed"):
            return False
        self.failed[key] = self.failed.get(key, 0) + 1
        return self.failed[key] >= UNPARSED_ABORT


class _Signals:
    """Counts SIGINTs while a session runs; a second SIGINT, or any SIGTERM/SIGHUP, kills the run in flight."""

    def __init__(self, executor: Executor):
        self.executor, self.count, self.previous = executor, 0, {}
        self.name = "SIGINT"

    def __enter__(self) -> "_Signals":
        for sig in _STOP_SIGNALS:
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: no handlers
                break
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame) -> None:
        self.name = signal.Signals(signum).name
        self.count += 1 if signum == signal.SIGINT else 2
        if self.count >= 2:
            self.executor.interrupt()


class Runner:
    """Runs an experiment's sessions into a store: opens one, then executes its schedule."""

    def __init__(self, exp: Experiment, store: Store, backend: Backend, executor: Executor,
                 environment: dict[str, str] | None = None, progress: Callable[[int, int, str], None] | None = None,
                 say: Callable[[str], None] = lambda line: None, stopping: Callable | None = None):
        self.exp, self.store, self.backend, self.executor = exp, store, backend, executor
        self.environment = {**(environment or {}), "layout": describe_layout(exp.layout)}  # stored with a new session
        self.progress = progress or (lambda done, total, label: None)
        self.say = say
        self.stopping = stopping or analysis_stopping  # (store, exp) -> the decision at a look
        self.real = getattr(executor, "resolves_programs", True)  # real programs: looked up, hashed, shimmed
        self.sides = Sides(exp)
        cpus = None if exp.pin is None else pinned_cpus(exp.pin, exp.path)
        self.one = OneRun(exp, backend, executor, self.sides, cpus, self.real)
        self.busy = BusyMeter() if self.real else None  # other work on the machine, real runs only

    def run(self, side: str | None = None, resume: bool = False, new_session: bool = False,
            takeover: bool = False) -> SessionResult:
        """Open a new session, or the unfinished one with ``resume``, and execute its schedule."""
        if any(v.kernel is not None and v.kernel.boot == "kexec" for v in self.exp.variants):
            raise UsageError(f"{self.exp.path}: its sides are kernels this machine kexecs into; run it with `perfab "
                             "run` or `perfab kexec start` (perfab.kexec), which switch kernels between the sides")
        opener = Opener(self.backend, self.sides, self.environment, self.real, self.say)
        return self.execute(open_session(self.exp, self.store, opener, Opening(side, resume, new_session, takeover)))

    def execute(self, opened: OpenSession, pause: str | None = None) -> SessionResult:
        """Execute an open session's schedule; record how it ended and release it, however it ends.

        ``pause``: the schedule is a part of the session (a kexec session's boot): when it finishes, the
        session is stored with this status instead of ``finished``, to be resumed."""
        walk = _Walk(self, opened, _failure_limit(self.exp, opened.schedule))
        self.one.replication = opened.replication  # each run's boot and perturbation
        status, stop_reason = "aborted", None  # unless the walk says otherwise; an exception leaves it resumable
        scratch.sweep()  # folders of killed runners and guest launchers (their QEMU stopped first)
        scratch_root = Path(scratch.make("run"))  # a killed runner's is removed by the next one (scratch.sweep)
        try:
            with _Signals(self.executor) as signals:
                status, stop_reason = walk.all(signals, scratch_root)
                if signals.count and status == "finished":
                    status = "interrupted"
        finally:
            shutil.rmtree(scratch_root, ignore_errors=True)
            scratch.release(scratch_root)
            stored = pause if pause is not None and status == "finished" else status
            self._finish(opened, stored, stop_reason if status == "finished" else None)
        if status == "aborted":
            raise PerfabError(walk.why_aborted())
        return SessionResult(opened.id, status, walk.done, walk.failed, opened.side)

    def _finish(self, opened: OpenSession, status: str, stop_reason: str | None) -> None:
        """Store the session's end and its other-work sums (the report's SETUP states them and warns)."""
        try:
            if self.busy is not None and self.busy.total.runs:
                total = self.busy.total if opened.busy_before is None else opened.busy_before.add(self.busy.total)
                self.store.add_environment(opened.id, total.to_env())
            self.store.finish_session(opened.id, status, stop_reason)
        except PerfabError as e:
            self.say(f"warning: could not record the session's end ({e})")


class _Walk:
    """One execution of a schedule: what is open (a workload, a cell), the counts, why it stopped."""

    def __init__(self, runner: Runner, opened: OpenSession, limit: int):
        self.r, self.opened, self.limit = runner, opened, limit
        self.done, self.failed, self.last_failure = 0, 0, ""  # runs stored, measured runs failed, the last reason
        self.unparsed, self.abort_reason = _Unparsed(), None  # unparsed points; why it aborted, if not by count
        self.open: list[tuple[str, Callable[[], None]]] = []  # ("workload" | "cell", closer), innermost last
        self.cell: SideContext | None = None  # the cell entered, None while none is
        self.workload: Workload | None = None  # the workload of the current stretch
        self.parse, self.index, self.total = None, 0, 0  # its parser; its runs done and all, for progress
        self.quiet: dict[tuple, SideContext] = {}  # cell -> its context, kept: entering and leaving do nothing

    def all(self, signals: "_Signals", scratch_root: Path) -> tuple[str, str | None]:
        """Execute every event (those a look appends too): (finished | interrupted | aborted, why it stopped)."""
        self.signals, self.scratch_root = signals, scratch_root
        handlers = {Build: lambda e: None, WorkloadSetup: self._setup, WorkloadTeardown: self._teardown,
                    EnterCell: lambda e: self._enter(e.cell), LeaveCell: lambda e: self._close("cell"),
                    Run: self._run, Look: self._look}
        try:
            for event in self.opened.schedule:
                if signals.count:
                    return "interrupted", None
                if (outcome := handlers[type(event)](event)) is not None:
                    return outcome
            return "finished", None
        finally:
            self._close_all()

    def why_aborted(self) -> str:
        """The one-line reason an aborted session gives."""
        return self.abort_reason or (f"aborted after {self.failed} failed runs (last: {self.last_failure}); fix "
                                     "the workload or raise experiment.max_failures, then continue with --resume")

    def _setup(self, event: WorkloadSetup) -> None:
        """The workload's own setup, in the environment of its stretch's first side; its teardown is owed."""
        exp, workload = self.r.exp, self.r.exp.workload(event.workload)
        self.parse = _parser(workload)
        self.workload, self.index, self.total = workload, 0, event.runs
        own = workload_placeholders(exp, workload)
        env, cwd = self.r.sides.env(exp.variant(event.side)), _shared_cwd(workload, own)
        for command in workload.setup:
            run_shell(expand(command, own), env, cwd, "workload setup")
        self.open.append(("workload", lambda: _commands(workload.teardown, env, cwd, own, self.r.say)))

    def _teardown(self, event: WorkloadTeardown) -> None:
        self.r.progress(self.total, self.total, event.workload)
        self._close("workload")

    def _enter(self, cell: tuple) -> None:
        """Enter a cell: the side's setup, the workload's service for that side and point.  A quiet cell's
        context (nothing to set up, tear down or start) is made once and kept: an interleaved plan switches
        cells at nearly every run."""
        ctx = self.quiet.get(cell)
        if ctx is None:
            exp, sides = self.r.exp, self.r.sides
            workload, variant = exp.workload(cell[0]), exp.variant(cell[1])
            values = sides.values(variant, workload, cell[2])
            ctx = SideContext(exp, workload, variant, cell[2], sides.env(variant), sides.cwd(workload, values),
                              self.r.say, sides.source(variant), starts_service=not self.r.backend.runs_service)
            ctx.__enter__()
            if ctx.quiet:
                self.quiet[cell] = ctx
        self.cell = ctx
        self.open.append(("cell", _stay if ctx.quiet else lambda: ctx.__exit__(None, None, None)))

    def _close(self, kind: str) -> None:
        """Leave the innermost open thing if it is a ``kind`` (a cell left early is not left twice)."""
        if self.open and self.open[-1][0] == kind:
            if kind == "cell":
                self.cell = None
            self.open.pop()[1]()

    def _close_all(self) -> None:
        """Leave whatever is open, innermost first, each one even when another fails."""
        self.cell = None
        with ExitStack() as stack:
            for _, closer in self.open:
                stack.callback(closer)
            self.open = []

    def _run(self, event: Run):
        """One run, stored; an outcome when the session must stop because of it."""
        planned, r = event.planned, self.r
        variant = r.exp.variant(planned.variant)
        if self.cell is None:  # left after its service failed: a fresh server
            self._enter((planned.workload, planned.variant, planned.params))
        ctx = self.cell
        r.progress(self.index, self.total, f"{self.workload.name} {variant.name}")
        self.index += 1
        rec = r.one.measured(planned, self.workload, variant, self.parse, self.scratch_root, ctx, r.busy)
        for _ in range(TRANSIENT_RETRIES):
            if not rec.transient or self.signals.count:
                break
            r.store.record_run(self.opened.id, planned, rec)  # kept as an attempt; the re-run supersedes it
            r.say(f"run {planned.seq} ({self.workload.name}, {variant.name}): {rec.reason}; run again")
            rec = r.one.run(planned, self.workload, variant, self.parse, self.scratch_root, ctx)
        if self.signals.count >= 2:
            rec = interrupted(rec, f"abandoned at {self.signals.name}")
        r.store.record_run(self.opened.id, planned, rec)
        self.done += 1
        return self._judge(planned, variant, rec, ctx)

    def _judge(self, planned: PlannedRun, variant: Variant, rec: RunRecord, ctx: SideContext):
        """Count a stored run; an outcome when too many failed, a point cannot be parsed, or it was abandoned."""
        if rec.status == "failed" and not planned.warmup:
            self.failed, self.last_failure = self.failed + 1, rec.reason or "unknown"
            self.r.say(f"run {planned.seq} ({planned.workload}, {variant.name}) failed: {rec.reason}")
            if self.failed > self.limit:
                return "aborted", None
        if self.r.exp.max_failures is None and self.unparsed.hopeless(planned, rec):
            self.abort_reason = _unparsed_abort(self.r.exp, planned, rec)
            return "aborted", None
        if rec.status == "failed" and ctx.service_problem():
            self._close("cell")  # the next run starts a fresh server
        if rec.status == "interrupted":
            return "interrupted", None
        return None

    def _look(self, event: Look):
        """A sequential look: stop with the stopping test's reason, or store and schedule the next block."""
        r = self.r
        decision = r.stopping(r.store, r.exp)
        if decision.stop:
            r.say(decision.reason)
            return "finished", decision.reason
        more = self.opened.schedule.extend()
        if not more:  # max_runs reached without a decision: the decision says why
            return "finished", decision.reason
        r.say(f"look {decision.look} after {decision.runs_per_side} runs per side: {decision.reason}")
        r.store.extend_plan(self.opened.id, more)
        return None


def _stay() -> None:
    """Leaving a quiet cell: nothing to do (its context is kept for the next time)."""


def _failure_limit(exp: Experiment, schedule: Schedule) -> int:
    """Failed measured runs tolerated: experiment.max_failures, else a quarter of the most the session may run."""
    measured = sum(1 for p in schedule.runs() if not p.warmup)
    if exp.sequential is not None:  # the policy applies to the most the plan can grow to
        measured = max(measured, exp.sequential.max_runs * len(exp.variants) * len(exp.workloads))
    return exp.max_failures if exp.max_failures is not None else max(3, measured // 4)


def _unparsed_abort(exp: Experiment, planned: PlannedRun, rec: RunRecord) -> str:
    """The abort message when a sweep point's output cannot be parsed at all."""
    point = " at " + " ".join(f"{k}={v}" for k, v in planned.params) if planned.params else ""
    return (f"aborted: the first {UNPARSED_ABORT} runs of workload {planned.workload!r}{point} all failed to "
            f"parse ({rec.reason}); check every point with `perfab plan {exp.path} --try`, fix the parser "
            "and continue with --resume (the stored outputs are read again)")


def _commands(commands, env: dict[str, str], cwd: str | None, values: dict[str, str], say) -> None:
    """A workload's teardown commands; one that fails is a warning, the others still run."""
    for command in commands:
        try:
            run_shell(expand(command, values), env, cwd, "teardown")
        except PerfabError as e:
            say(f"warning: {e}")


def _shared_cwd(workload: Workload, own: dict[str, str]) -> str | None:
    """The directory of a workload's own setup: its cwd when that does not depend on the side, else perfab's."""
    if workload.cwd is None:
        return None
    try:
        return expand(workload.cwd, own)
    except PerfabError:
        return None


def _parser(workload: Workload):
    """The workload's output parser, None without one."""
    if workload.parser is None:
        return None
    from perfab.parsers import get_parser

    return get_parser(workload.parser, workload.parser_options)
