"""Stage 3: running the plan, one run at a time, each stored the moment it ends.

For every planned run the runner expands the side's placeholders, wraps the
command (the side's ``wrap`` prefix, then the backend's), executes it, asks
the backend for its readings, parses the workload's own output, and commits
the run.  A failed run is stored with its reason, never dropped; when more
runs fail than the policy allows, the session is aborted (stored runs stay).

SIGINT: the first one lets the run in flight finish, stores it and stops;
a second one abandons the run in flight (stored as ``interrupted``, which
``--resume`` runs again).  Either way the session can be resumed.
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
from perfab.plan import PlannedRun, make_plan
from perfab.run.backends import Backend
from perfab.run.executor import Execution, Executor
from perfab.run.services import Service, run_shell
from perfab.spec import Experiment, Variant, Workload, expand, placeholders
from perfab.store import RunRecord, Store

# Metrics every run carries, from wait4's rusage: (unit, higher_is_better).
RUSAGE_METRICS = {
    "wall_s": ("s", False),
    "user_s": ("s", False),
    "sys_s": ("s", False),
    "max_rss_kb": ("KiB", False),
    "vcsw": ("count", False),
    "ivcsw": ("count", False),
}


@dataclass(frozen=True)
class SessionResult:
    """How a session ended."""

    session: int  # session id in the store
    status: str  # finished | interrupted | aborted
    runs_done: int  # runs executed in this invocation
    runs_failed: int  # of which failed
    side: str | None  # external side run, None when all sides ran


class _Interrupts:
    """Counts SIGINTs while a session runs; the second one kills the run in flight."""

    def __init__(self, executor: Executor):
        self.executor, self.count, self.previous = executor, 0, None

    def __enter__(self) -> "_Interrupts":
        try:
            self.previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: no handler
            self.previous = None
        return self

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

    def _handle(self, signum, frame) -> None:
        self.count += 1
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
        self._cpus = _cpus(exp.pin)
        self.recorder = _recorder(exp)

    # -- sessions -----------------------------------------------------------

    def run(self, side: str | None = None, resume: bool = False, new_session: bool = False) -> SessionResult:
        """Plan and run a new session, or continue the unfinished one with ``resume``."""
        pending = self.store.unfinished_session(self.exp.name)
        if resume:
            if pending is None:
                raise UsageError(f"experiment {self.exp.name!r} has no unfinished session to resume; "
                                 "run it without --resume")
            if pending.spec_text != self.exp.source:
                raise UsageError(f"{self.exp.path} changed since session {pending.id} began; restore it "
                                 "or start a new session with --new-session")
            session, side = pending.id, pending.side
            todo = self.store.remaining(session)
        else:
            if pending is not None and not new_session:
                left = len(self.store.remaining(pending.id))
                raise UsageError(f"experiment {self.exp.name!r} has an unfinished session ({left} runs left); "
                                 "continue it with --resume or start another with --new-session")
            side = self.resolve_side(side)
            todo = make_plan(self.exp, [side] if side else None, len(self.groups))
            self._check_placeholders({p.variant for p in todo})
            session = self.store.start_session(self.exp.name, self.exp.source, self.exp.path, self.exp.spec_hash,
                                               side, self.backend.name, self.groups, self.environment, todo)
        return self._execute(session, side, todo)

    def _check_placeholders(self, sides: set[str]) -> None:
        """Expand every command once, so a bad placeholder stops the session before it is stored."""
        for workload in self.exp.workloads:
            svc = workload.service
            for variant in (v for v in self.exp.variants if v.name in sides):
                values = placeholders(self.exp, variant, workload)
                texts = [*workload.argv, *variant.wrap, *variant.setup, *variant.teardown, *workload.setup,
                         *workload.teardown, workload.cwd or "", *(svc.argv if svc else ()), (svc and svc.cwd) or ""]
                for text in texts:
                    expand(text, values, f"workload {workload.name!r}, variant {variant.name!r}")

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
        limit = self.exp.max_failures if self.exp.max_failures is not None else max(3, measured // 4)
        self._failed, self._done, self._last_failure = 0, 0, ""
        status = "aborted"  # unless the loop says otherwise; an exception leaves the session resumable
        scratch_root = Path(tempfile.mkdtemp(prefix="perfab-"))
        try:
            with _Interrupts(self.executor) as interrupts:
                for workload, runs in _by_workload(todo):
                    status = self._workload(session, workload, runs, interrupts, scratch_root, limit)
                    if status != "finished":
                        break
        finally:
            shutil.rmtree(scratch_root, ignore_errors=True)
            self.store.finish_session(session, status)
        if status == "aborted":
            raise PerfabError(f"aborted after {self._failed} failed runs (last: {self._last_failure}); fix the "
                              "workload or raise experiment.max_failures, then continue with --resume")
        return SessionResult(session, status, self._done, self._failed, side)

    # -- one workload -------------------------------------------------------

    def _workload(self, session, name, runs, interrupts, scratch_root, limit) -> str:
        workload = next(w for w in self.exp.workloads if w.name == name)
        parse = _parser(workload)
        total = len(runs)
        with ExitStack() as stack:
            first = self.exp.variant(runs[0].variant)
            env0 = self._env(first)
            cwd0 = self._cwd(workload, first)
            for command in workload.setup:
                run_shell(expand(command, placeholders(self.exp, first, workload)), env0, cwd0, "workload setup")
            stack.callback(self._teardown, workload.teardown, env0, cwd0, placeholders(self.exp, first, workload))
            if workload.service:
                svc = workload.service
                values = placeholders(self.exp, first, workload)
                stack.enter_context(Service([expand(a, values) for a in svc.argv], svc.port, svc.ready_timeout_s,
                                            env0, svc.cwd and expand(svc.cwd, values), scratch_root / "service.log"))
            current: list[Variant] = []
            stack.callback(lambda: current and self._teardown(current[0].teardown, self._env(current[0]),
                                                              self._cwd(workload, current[0]),
                                                              placeholders(self.exp, current[0], workload)))
            for i, planned in enumerate(runs):
                if interrupts.count:
                    return "interrupted"
                variant = self.exp.variant(planned.variant)
                if not current or current[0].name != variant.name:
                    self._switch(current, variant, workload)
                self.progress(i, total, f"{workload.name} {variant.name}")
                rec = self._one(planned, workload, variant, parse, scratch_root)
                if interrupts.count >= 2:
                    rec = _interrupted(rec)
                self.store.record_run(session, planned, rec)
                self._done += 1
                if rec.status == "failed" and not planned.warmup:
                    self._failed += 1
                    self._last_failure = rec.reason or "unknown"
                    self.say(f"run {planned.seq} ({workload.name}, {variant.name}) failed: {rec.reason}")
                    if self._failed > limit:
                        return "aborted"
                if rec.status == "interrupted":
                    return "interrupted"
            self.progress(total, total, workload.name)
        return "interrupted" if interrupts.count else "finished"

    def _switch(self, current: list[Variant], variant: Variant, workload: Workload) -> None:
        if current:
            old = current.pop()
            self._teardown(old.teardown, self._env(old), self._cwd(workload, old),
                           placeholders(self.exp, old, workload))
        for command in variant.setup:
            run_shell(expand(command, placeholders(self.exp, variant, workload)), self._env(variant),
                      self._cwd(workload, variant), f"setup of variant {variant.name!r}")
        current.append(variant)

    def _teardown(self, commands, env, cwd, values) -> None:
        for command in commands:
            try:
                run_shell(expand(command, values), env, cwd, "teardown")
            except PerfabError as e:
                self.say(f"warning: {e}")

    # -- one run ------------------------------------------------------------

    def _one(self, planned: PlannedRun, workload: Workload, variant: Variant, parse, scratch_root: Path) -> RunRecord:
        values = placeholders(self.exp, variant, workload)
        argv = [expand(a, values, f"workload {workload.name!r} argv") for a in workload.argv]
        if workload.shell:
            argv = ["/bin/sh", "-c", argv[0]]
        argv = [expand(a, values) for a in variant.wrap] + argv
        group = self.groups[planned.group]
        scratch = scratch_root / "run"  # one directory, emptied after each run that wrote to it
        scratch.mkdir(exist_ok=True)
        try:
            inner = self.recorder.wrap(argv, scratch) if self.recorder else argv
            full = self.backend.wrap(inner, scratch, group)
            started = time.time()
            ex = self.executor.execute(full, self._env(variant), self._cwd(workload, variant), workload.timeout_s,
                                       self.exp.stdout_cap_bytes, self._cpus)
            measurement = None
            if ex.error is None:
                if ex.stderr_tail:
                    (scratch / "stderr").write_bytes(ex.stderr_tail)  # perf's last words (a signal death)
                measurement = self.backend.collect(scratch, group, ex.status)
            if self.recorder and ex.error is None and ex.status == 0:
                measurement = _with_profile(measurement, self.recorder, scratch)
        finally:
            if os.listdir(scratch):
                shutil.rmtree(scratch, ignore_errors=True)  # next run recreates it
        return _record(ex, started, measurement, parse, self.backend, workload)

    def _env(self, variant: Variant) -> dict[str, str]:
        env = self._envs.get(variant.name)
        if env is None:
            env = dict(os.environ)
            env.update(variant.env)
            env["LC_ALL"] = "C"
            self._envs[variant.name] = env
        return env

    def _cwd(self, workload: Workload, variant: Variant) -> str | None:
        if workload.cwd is None:
            return None
        return expand(workload.cwd, placeholders(self.exp, variant, workload), f"workload {workload.name!r} cwd")


def _record(ex: Execution, started: float, measurement, parse, backend: Backend, workload: Workload) -> RunRecord:
    """Turn an execution, the backend's readings and the parsed output into a stored run."""
    metrics: dict[str, float] = {}
    meta: dict[str, tuple[str | None, bool | None, bool]] = {}
    reason = _failure(ex, workload)
    excluded: dict[str, str] = {}
    notes: tuple[str, ...] = ()
    if ex.error is None:
        metrics.update(wall_s=ex.wall_s, user_s=ex.user_s, sys_s=ex.sys_s, vcsw=float(ex.nvcsw),
                       ivcsw=float(ex.nivcsw))
        if ex.max_rss_kb is not None:
            metrics["max_rss_kb"] = float(ex.max_rss_kb)
        else:
            excluded["max_rss_kb"] = "not measurable (at most perfab's own peak RSS)"
        meta.update({m: (u, hib, False) for m, (u, hib) in RUSAGE_METRICS.items()})
    if measurement is not None:
        metrics.update(measurement.metrics)
        excluded.update(measurement.excluded)
        notes = tuple(measurement.notes)
        info = backend.metric_info()
        meta.update({m: (i.unit, i.higher_is_better, i.exact) for m, i in info.items() if m in measurement.metrics})
        reason = measurement.failure or reason  # the backend knows more than an exit status
    if reason is None and parse is not None:
        try:
            parsed = parse(ex.stdout.decode(errors="replace"), ex.stderr.decode(errors="replace"))
        except PerfabError as e:
            reason = f"output not parsed: {e}"
        else:
            metrics.update({m: p.value for m, p in parsed.items()})
            meta.update({m: (p.unit, p.higher_is_better, False) for m, p in parsed.items()})
    return RunRecord("failed" if reason else "ok", reason, started, ex.wall_s, ex.user_s, ex.sys_s, ex.max_rss_kb,
                     ex.nvcsw, ex.nivcsw, ex.exit_code, ex.signal, ex.timed_out, ex.stdout, ex.stderr,
                     ex.stdout_bytes, ex.stderr_bytes, metrics if reason is None else {}, excluded, notes, meta)


def _failure(ex: Execution, workload: Workload) -> str | None:
    if ex.error:
        return ex.error
    if ex.timed_out:
        return f"timed out after {workload.timeout_s:g} s"
    if ex.signal is not None:
        return f"killed by {signal.Signals(ex.signal).name}"
    if ex.exit_code:
        tail = ex.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f"exit status {ex.exit_code}" + (f": {tail[0][:120]}" if tail else "")
    return None


def _interrupted(rec: RunRecord) -> RunRecord:
    return RunRecord("interrupted", "abandoned at SIGINT", rec.started_at, rec.wall_s, rec.user_s, rec.sys_s,
                     rec.max_rss_kb, rec.nvcsw, rec.nivcsw, rec.exit_code, rec.signal, rec.timed_out, rec.stdout,
                     rec.stderr, rec.stdout_bytes, rec.stderr_bytes)


def _recorder(exp: Experiment):
    """A perf record wrapper when the spec asks for profiles."""
    if not exp.measure.profile:
        return None
    from perfab.profile import ProfileRecorder

    return ProfileRecorder(exp.measure.profile_event, exp.measure.profile_freq)


def _with_profile(measurement, recorder, scratch: Path):
    """Add the run's per-symbol self shares (``self.<event>:<k|u>.<symbol>``) to the backend's readings."""
    from dataclasses import replace

    try:
        shares = recorder.collect(scratch)
    except PerfabError as e:
        return replace(measurement, failure=measurement.failure or f"profile: {e}")
    return replace(measurement, metrics={**measurement.metrics, **shares})


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


def _cpus(pin: str | None) -> set[int] | None:
    if pin is None:
        return None
    cpus: set[int] = set()
    for part in pin.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    available = os.sched_getaffinity(0)
    if not cpus <= available:
        raise UsageError(f"experiment.pin = {pin!r} names CPUs this machine does not offer "
                         f"(available: {sorted(available)}); pick from those")
    return cpus


def _detects(variant: Variant) -> bool:
    try:
        out = subprocess.run(["/bin/sh", "-c", variant.detect], capture_output=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(variant.detect_pattern, out) is not None
