"""Stage 3: running the plan, one run at a time, each stored the moment it ends.

``Runner.run`` is the session's life: claim a session (a new one, or the
unfinished one with ``--resume``; a second runner is refused with the
holder's name), check every command before anything is stored, then
execute the stored plan and release the session however it ends.

Around the runs of each cell (workload, side, sweep point) a
``SideContext`` runs the side's setup and starts the workload's service
with that side's placeholders, and stops it again when the plan switches
cell.  For every planned run the runner expands the cell's placeholders,
wraps the command (the side's ``wrap`` prefix, then the backend's),
executes it, asks the backend for its readings, parses the workload's own
output, and commits the run (``perfab.run.readings``).  A failed run is
stored with its reason, never dropped; when more runs fail than the
policy allows, the session is aborted (stored runs stay).  A run that
failed by a race of the measuring tool itself (perf stat 6.1 losing a
short workload's exit status) is stored and run again at once, up to
twice: the newest attempt counts.

Signals: the first SIGINT lets the run in flight finish, stores it and
stops; a second one abandons the run in flight.  SIGTERM and SIGHUP stop at
once, like a second SIGINT.  An abandoned run is stored as
``interrupted`` and ``--resume`` runs it again as a new attempt.  Services
are stopped and the session released either way.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from perfab.errors import PerfabError, UsageError
from perfab.machine.busy import Busy, BusyMeter
from perfab.plan import PlannedRun, block_of, blocks_for, first_blocks, make_plan
from perfab.run.backends import Backend
from perfab.run.around import Around
from perfab.run.build import build_all, resolve
from perfab.run.layout import LAYOUT, Padding
from perfab.run.programs import session_sources
from perfab.run.context import SideContext
from perfab.run.executor import Executor
from perfab.run.preflight import pinned_cpus, preflight
from perfab.run.readings import interrupted, record
from perfab.run.reparse import parser_only, reparse_session
from perfab.run.services import run_shell
from perfab.run.trampoline import read_rusage, rusage_shim
from perfab.spec import Experiment, Variant, Workload, expand, placeholders, workload_placeholders
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
    """Runs an experiment's plan into a store."""

    def __init__(self, exp: Experiment, store: Store, backend: Backend, executor: Executor,
                 environment: dict[str, str] | None = None, progress: Callable[[int, int, str], None] | None = None,
                 say: Callable[[str], None] = lambda line: None):
        self.exp, self.store, self.backend, self.executor = exp, store, backend, executor
        self.environment = environment or {}
        self.progress = progress or (lambda done, total, label: None)
        self.say = say
        self.groups = backend.groups()
        self._envs: dict[str, dict[str, str]] = {}
        self._cpus = None if exp.pin is None else pinned_cpus(exp.pin, exp.path)
        self.recorder = _recorder(exp)
        self.sources: dict = {}  # side -> perfab.run.build.Source, for sides built from source
        self.busy = BusyMeter() if getattr(executor, "resolves_programs", True) else None  # other work, real runs
        self._busy_before: Busy | None = None  # what a resumed session measured before
        self._padding = Padding(exp.variants)  # equal argv and environment bytes on every side
        self.environment = {**self.environment, "layout": LAYOUT}

    # -- sessions -----------------------------------------------------------

    def run(self, side: str | None = None, resume: bool = False, new_session: bool = False,
            takeover: bool = False) -> SessionResult:
        """Plan and run a new session, or continue the unfinished one with ``resume``."""
        pending = self.store.unfinished_session(self.exp.name)
        if resume:
            if pending is None:
                raise UsageError(f"experiment {self.exp.name!r} has no unfinished session to resume; "
                                 "run it without --resume")
            reparse = pending.spec_text != self.exp.source
            if reparse and not parser_only(pending.spec_text, self.exp.source):
                raise UsageError(f"{self.exp.path} changed since session {pending.id} began, beyond its parsers; "
                                 "restore it or start a new session with --new-session")
            self.store.claim(pending.id, takeover)
            if reparse:
                self._reparse(pending.id)
            self._busy_before = Busy.from_env(pending.environment)
            session, side = pending.id, pending.side
            recorded = {k: v.get("content") for k, v in (pending.sources or {}).items() if isinstance(v, dict)}
            self.sources = self._build([side] if side else None, recorded)
            todo = self.store.remaining(session)
        else:
            if pending is not None and not new_session:
                left = len(self.store.remaining(pending.id))
                raise UsageError(f"experiment {self.exp.name!r} has an unfinished session ({left} runs left); "
                                 "continue it with --resume or start another with --new-session")
            side = self.resolve_side(side)
            sides = [side] if side else None
            self.sources = self._build(sides)
            preflight(self.exp, sides, self._env, getattr(self.executor, "resolves_programs", True), self.sources)
            todo = make_plan(self.exp, sides, len(self.groups))
            if self.exp.sequential is not None:  # stored block by block: the first min_runs, then as needed
                todo = first_blocks(todo, blocks_for(self.exp, self.exp.sequential.min_runs))
            session = self.store.start_session(self.exp.name, self.exp.source, self.exp.path, self.exp.spec_hash,
                                               side, self.backend.name, self.groups, self.environment, todo,
                                               self._sources_json(sides), self.exp.design)
        return self._execute(session, side, todo)

    def _reparse(self, session: int) -> None:
        """A parser-only change on resume: read the session's stored outputs again, then adopt the spec."""
        done = reparse_session(self.store, session, self.exp, self.backend.name)
        self.store.replace_spec(session, self.exp.source, self.exp.spec_hash, self.exp.design)
        self.say(f"the parser changed: {done.parsed} stored run(s) read again, {done.unparsed} still unreadable, "
                 f"{done.kept} kept as they were")

    def _sources_json(self, sides: list[str] | None) -> dict:
        """What the session stores of each side's origin: its build, and the content of the programs it runs."""
        real = getattr(self.executor, "resolves_programs", True)
        return session_sources(self.exp, self.sources, sides, self._env, self._source, real)

    def _build(self, sides: list[str] | None, recorded: dict[str, str] | None = None) -> dict:
        """Resolve, check out and build the sides that come from source, before anything is stored; on resume,
        ``recorded`` holds each side's content hash as the session stored it."""
        chosen = [v for v in self.exp.variants if sides is None or v.name in sides]
        sources = resolve(self.exp, chosen)
        preflight(self.exp, sides, self._env, False, sources)  # placeholders, before a long build
        built = build_all(self.exp, sources, self._env, self.say, recorded)
        self.backend.prepare(tuple(chosen), self.say)  # e.g. the sides' kernels, built from their checkouts
        return built

    def resolve_side(self, side: str | None) -> str | None:
        """The external side this session is (``--side`` or the variants' ``detect``)."""
        if side is not None:
            self.exp.variant(side)  # raises for an unknown name
            if not self.exp.variants[0].external:
                raise UsageError(f"--side {side}: the sides of {self.exp.name!r} are not external; "
                                 "drop --side (all sides run in one session)")
            return side
        if not self.exp.variants[0].external:
            return None
        matches = [v.name for v in self.exp.variants if v.detect and _detects(v)]
        if len(matches) != 1:
            found = "no side" if not matches else f"several sides ({', '.join(matches)})"
            raise UsageError(f"this machine matches {found} of {self.exp.name!r}; pass --side NAME "
                             "or fix the variants' detect / detect_pattern")
        return matches[0]

    def _execute(self, session: int, side: str | None, todo: list[PlannedRun]) -> SessionResult:
        measured = sum(1 for p in todo if not p.warmup)
        if self.exp.sequential is not None:  # the policy applies to the most the plan can grow to
            measured = max(measured, self.exp.sequential.max_runs * len(self.exp.variants) * len(self.exp.workloads))
        limit = self.exp.max_failures if self.exp.max_failures is not None else max(3, measured // 4)
        self._failed, self._done, self._last_failure = 0, 0, ""
        self._unparsed, self._why_abort = _Unparsed(), None
        status, stop_reason = "aborted", None  # unless the loop says otherwise; an exception leaves it resumable
        scratch_root = Path(tempfile.mkdtemp(prefix="perfab-"))
        try:
            with _Signals(self.executor) as signals:
                status = self._run_all(session, todo, signals, scratch_root, limit)
                while status == "finished" and self.exp.sequential is not None and stop_reason is None:
                    stop_reason, more = self._look(session, side)
                    if more:
                        self.store.extend_plan(session, more)
                        status = self._run_all(session, more, signals, scratch_root, limit)
                if signals.count and status == "finished":
                    status = "interrupted"
        finally:
            shutil.rmtree(scratch_root, ignore_errors=True)
            try:
                self._record_busy(session)
                self.store.finish_session(session, status, stop_reason if status == "finished" else None)
            except PerfabError as e:
                self.say(f"warning: could not record the session's end ({e})")
        if status == "aborted" and self._why_abort is not None:
            raise PerfabError(self._why_abort)
        if status == "aborted":
            raise PerfabError(f"aborted after {self._failed} failed runs (last: {self._last_failure}); fix the "
                              "workload or raise experiment.max_failures, then continue with --resume")
        return SessionResult(session, status, self._done, self._failed, side)

    def _run_all(self, session: int, todo: list[PlannedRun], signals, scratch_root: Path, limit: int) -> str:
        status = "finished"
        for workload, runs in _by_workload(todo):
            status = self._workload(session, workload, runs, signals, scratch_root, limit)
            if status != "finished":
                break
        return status

    def _look(self, session: int, side: str | None) -> tuple[str | None, list[PlannedRun]]:
        """A sequential experiment's look after a block: (why it stops, or None; the next block's runs)."""
        from perfab.analyse.compare import compare

        decision = compare(self.store.load(self.exp.name), self.exp).decision
        if decision.stop:
            self.say(decision.reason)
            return decision.reason, []
        planned = self.store.planned(session)
        last = max((p.block for p in planned if not p.warmup), default=-1)
        full = make_plan(self.exp, [side] if side else None, len(self.groups))
        more = block_of(full, last + 1, max(p.seq for p in planned) + 1)
        if not more:  # max_runs reached without a decision: the decision says why
            return decision.reason, []
        self.say(f"look {decision.look} after {decision.runs_per_side} runs per side: {decision.reason}")
        return None, more

    # -- one workload -------------------------------------------------------

    def _workload(self, session, name, runs, signals, scratch_root, limit) -> str:
        workload = self.exp.workload(name)
        parse = _parser(workload)
        total = len(runs)
        own = workload_placeholders(self.exp, workload)
        with ExitStack() as stack:
            env0 = self._env(self.exp.variant(runs[0].variant))
            cwd0 = _shared_cwd(workload, own)
            for command in workload.setup:
                run_shell(expand(command, own), env0, cwd0, "workload setup")
            stack.callback(self._teardown, workload.teardown, env0, cwd0, own)
            context: list[SideContext] = []
            stack.callback(lambda: context and context.pop().__exit__(None, None, None))
            for i, planned in enumerate(runs):
                if signals.count:
                    return "interrupted"
                variant = self.exp.variant(planned.variant)
                if not context or context[0].key != (workload.name, variant.name, planned.params):
                    if context:
                        context.pop().__exit__(None, None, None)
                    ctx = SideContext(self.exp, workload, variant, planned.params, self._env(variant),
                                      self._cwd(workload, self._values(variant, workload, planned)), self.say,
                                      self._source(variant))
                    ctx.__enter__()
                    context.append(ctx)
                self.progress(i, total, f"{workload.name} {variant.name}")
                rec = self._measured_one(planned, workload, variant, parse, scratch_root, context[0])
                for _ in range(TRANSIENT_RETRIES):
                    if not rec.transient or signals.count:
                        break
                    self.store.record_run(session, planned, rec)  # kept as an attempt; the re-run supersedes it
                    self.say(f"run {planned.seq} ({workload.name}, {variant.name}): {rec.reason}; run again")
                    rec = self._one(planned, workload, variant, parse, scratch_root, context[0])
                if signals.count >= 2:
                    rec = interrupted(rec, f"abandoned at {signals.name}")
                self.store.record_run(session, planned, rec)
                self._done += 1
                if rec.status == "failed" and not planned.warmup:
                    self._failed += 1
                    self._last_failure = rec.reason or "unknown"
                    self.say(f"run {planned.seq} ({workload.name}, {variant.name}) failed: {rec.reason}")
                    if self._failed > limit:
                        return "aborted"
                if self.exp.max_failures is None and self._unparsed.hopeless(planned, rec):
                    self._why_abort = _unparsed_abort(self.exp, planned, rec)
                    return "aborted"
                if rec.status == "failed" and context[0].service_problem():
                    context.pop().__exit__(None, None, None)  # the next run starts a fresh server
                if rec.status == "interrupted":
                    return "interrupted"
            self.progress(total, total, workload.name)
        return "interrupted" if signals.count else "finished"

    def _teardown(self, commands, env, cwd, values) -> None:
        for command in commands:
            try:
                run_shell(expand(command, values), env, cwd, "teardown")
            except PerfabError as e:
                self.say(f"warning: {e}")

    # -- one run ------------------------------------------------------------

    def _measured_one(self, planned, workload, variant, parse, scratch_root, ctx) -> RunRecord:
        """One run, with other work on the machine over its window summed (``perfab.machine.busy``)."""
        if self.busy is None:
            return self._one(planned, workload, variant, parse, scratch_root, ctx)
        self.busy.start()
        rec = self._one(planned, workload, variant, parse, scratch_root, ctx)
        self.busy.stop(_run_cpu_s(rec))
        return rec

    def _record_busy(self, session: int) -> None:
        """Store the session's other-work sums in its environment: the report's SETUP states them and warns."""
        if self.busy is None or self.busy.total.runs == 0:
            return
        total = self.busy.total if self._busy_before is None else self._busy_before.add(self.busy.total)
        self.store.add_environment(session, total.to_env())

    def _one(self, planned: PlannedRun, workload: Workload, variant: Variant, parse, scratch_root: Path,
             ctx: SideContext) -> RunRecord:
        values = self._values(variant, workload, planned)
        group = self.groups[planned.group]
        scratch = scratch_root / "run"  # one directory, emptied after each run that wrote to it
        scratch.mkdir(exist_ok=True)
        argv, shim = self._argv(workload, variant, values, scratch)
        started = time.time()
        if (problem := ctx.service_problem()) is not None:
            return _not_run(started, problem)
        backend = self.backend.for_side(variant, workload)
        around = Around(self.exp, ctx, self._service_counter(ctx, group, scratch), not backend.own_interrupts)
        if (problem := around.start()) is not None:
            return _not_run(started, problem)
        try:
            inner = self.recorder.wrap(argv, scratch) if self.recorder else argv
            full = backend.wrap(inner, scratch, group)
            cwd = self._cwd(workload, values)
            ex = self.executor.execute(full, self._padded_env(variant, workload, planned, cwd), cwd,
                                       workload.timeout_s, self.exp.stdout_cap_bytes, self._cpus)
            measurement = self._measurement(backend, ex, scratch, group)
            own_rusage = _shim_rusage(scratch / "rusage") if shim else None
        finally:
            around.stop_counting()
            if os.listdir(scratch):
                shutil.rmtree(scratch, ignore_errors=True)  # next run recreates it
        return around.finish(record(ex, started, measurement, parse, backend, workload, own_rusage), backend)

    def _padded_env(self, variant: Variant, workload: Workload, planned: PlannedRun, cwd: str | None) -> dict:
        """The side's environment padded to the widest side's string bytes (``perfab.run.layout``)."""
        return self._padding.env(variant, workload, planned.params, cwd,
                                 lambda v: self._values(v, workload, planned), self._env)

    def _argv(self, workload: Workload, variant: Variant, values: dict[str, str], scratch: Path):
        """The command: the side's wrap, the workload's rusage shim when a wrap may fork, the workload."""
        argv = [expand(a, values, f"workload {workload.name!r} argv") for a in workload.argv]
        if workload.shell:
            argv = ["/bin/sh", "-c", argv[0]]
        shim = None
        real = getattr(self.executor, "resolves_programs", True)
        if variant.wrap and real and not self.backend.wraps_workload:  # a wrapper may fork: rusage read inside it
            shim = rusage_shim(argv, scratch / "rusage")
            argv = shim or argv
        return [expand(a, values) for a in variant.wrap] + argv, shim

    def _measurement(self, backend: Backend, ex, scratch: Path, group: tuple[str, ...]):
        """The backend's readings (and the profile's) for an execution that started."""
        if ex.error is not None:
            return None
        if ex.stderr_tail:
            (scratch / "stderr").write_bytes(ex.stderr_tail)  # perf's last words (a signal death)
        measurement = backend.collect(scratch, group, ex.status)
        if self.recorder and ex.status == 0:
            measurement = _with_profile(measurement, self.recorder, scratch)
        return measurement

    def _service_counter(self, ctx: SideContext, group: tuple[str, ...], scratch: Path):
        """The backend's counter on the service (its pids or its CPUs) for this run, when the spec asks for it."""
        svc = ctx.workload.service
        if ctx.service is None or svc is None or not svc.counters or not self.backend.counts_service:
            return None
        pids = ctx.service.tree.pids() if ctx.service.tree is not None else []
        return self.backend.count_service(group, scratch, pids, svc.cpus if svc.counters == "cpus" else None)

    def _values(self, variant: Variant, workload: Workload, planned: PlannedRun) -> dict[str, str]:
        return placeholders(self.exp, variant, workload, planned.params, self._source(variant))

    def _source(self, variant: Variant) -> dict[str, str] | None:
        source = self.sources.get(variant.name)
        return source.values() if source is not None else None

    def _env(self, variant: Variant) -> dict[str, str]:
        env = self._envs.get(variant.name)
        if env is None:
            env = dict(os.environ)
            env.update(variant.env)
            env["LC_ALL"] = "C"
            self._envs[variant.name] = env
        return env

    def _cwd(self, workload: Workload, values: dict[str, str]) -> str | None:
        if workload.cwd is None:
            return None
        return expand(workload.cwd, values, f"workload {workload.name!r} cwd")


def _unparsed_abort(exp: Experiment, planned: PlannedRun, rec: RunRecord) -> str:
    """The abort message when a sweep point's output cannot be parsed at all."""
    point = " at " + " ".join(f"{k}={v}" for k, v in planned.params) if planned.params else ""
    return (f"aborted: the first {UNPARSED_ABORT} runs of workload {planned.workload!r}{point} all failed to "
            f"parse ({rec.reason}); check every point with `perfab plan {exp.path} --try`, fix the parser "
            "and continue with --resume (the stored outputs are read again)")


def _run_cpu_s(rec: RunRecord) -> float | None:
    """The CPU time a run used: the measured command's (wait4 rusage) and its service's; None if unknown."""
    if rec.user_s is None or rec.sys_s is None:
        return None
    return rec.user_s + rec.sys_s + rec.metrics.get("service_cpu_s", 0.0)


def _shim_rusage(path: Path) -> dict | None:
    """The workload's own rusage read by perfab-exec --rusage-out inside a wrapper, as rusage metrics."""
    report = read_rusage(path)
    if report is None:
        return None
    return {"wall_s": report.wall_s, "user_s": report.user_s, "sys_s": report.sys_s, "vcsw": float(report.nvcsw),
            "ivcsw": float(report.nivcsw),
            "max_rss_kb": None if report.max_rss_kb is None else float(report.max_rss_kb)}


def _shared_cwd(workload: Workload, own: dict[str, str]) -> str | None:
    """The directory of a workload's own setup: its cwd when that does not depend on the side, else perfab's."""
    if workload.cwd is None:
        return None
    try:
        return expand(workload.cwd, own)
    except PerfabError:
        return None


def _not_run(started: float, reason: str) -> RunRecord:
    return RunRecord("failed", reason, started, None, None, None, None, None, None, None, None, False, b"", b"", 0, 0)


def _recorder(exp: Experiment):
    """A perf record wrapper when the spec asks for profiles."""
    if not exp.measure.profile:
        return None
    from perfab.profile import ProfileRecorder

    return ProfileRecorder(exp.measure.profile_event, exp.measure.profile_freq)


def _with_profile(measurement, recorder, scratch: Path):
    """Add the run's per-symbol self shares to the backend's readings (stored apart from the metrics)."""
    from dataclasses import replace

    try:
        shares = recorder.collect(scratch)
    except PerfabError as e:
        return replace(measurement, failure=measurement.failure or f"profile: {e}")
    return replace(measurement, profile=shares)


def _parser(workload: Workload):
    if workload.parser is None:
        return None
    from perfab.parsers import get_parser

    return get_parser(workload.parser, workload.parser_options)


def _by_workload(todo: list[PlannedRun]):
    """Consecutive runs of the same workload, in plan order."""
    group: list[PlannedRun] = []
    for p in todo:
        if group and group[-1].workload != p.workload:
            yield group[0].workload, group
            group = []
        group.append(p)
    if group:
        yield group[0].workload, group


def _detects(variant: Variant) -> bool:
    try:
        out = subprocess.run(["/bin/sh", "-c", variant.detect], capture_output=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(variant.detect_pattern, out) is not None
