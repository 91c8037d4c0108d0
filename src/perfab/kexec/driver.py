"""A kexec session from boot to boot: check, store the plan, switch kernel, confirm it, run, switch again.

``begin`` (``perfab run SPEC`` on a spec whose sides kexec) checks the
machine and every side's kernel (``perfab.kexec.checks``), stores the
session with its whole plan, and switches to the first boot's side.
``proceed`` is what runs after every boot (``perfab kexec resume``, from
the systemd unit; or a fleet worker's resumed job).  What it finds, and
does:

- no boot pending (the session was interrupted between boots, or a boot
  could not be loaded): switch to the next side of the plan;
- a boot pending and still the boot that asked for it (the same boot id:
  the machine has not gone down yet, e.g. a fleet worker picked the job up
  again at once): nothing, it waits;
- a boot pending and the running kernel is that boot's (its token on the
  command line, the side's build id and release, within the side's
  ``boot_timeout``): it runs the boot's runs with the spec's backend,
  each stored the moment it ends, then switches to the next side; after
  the last side the session is finished and the machine does ``then``;
- a boot pending and any other kernel running: the side's kernel did not
  come back (it panicked and the firmware booted the default entry, a
  watchdog reset the machine, someone rebooted it) or came back too late:
  the side failed.  The boot's runs are stored as failed with that reason,
  the session is aborted, and the machine stays in the kernel it came back
  in, the fallback entry;
- a boot whose runs had begun and a kernel that is not that boot's: the
  side's kernel went down during its runs; the same.

Where the session stands is written to the state file (``perfab.kexec.state``)
before every switch and when a boot is confirmed, so a reboot at any point
leaves it able to say which of these it is.  Between boots the session is
stored as ``rebooting``: unfinished, resumable, claimed by no one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from perfab.errors import PerfabError, UsageError
from perfab.kexec import boots, checks
from perfab.kexec.identity import KernelIdentity, boot_token, image_facts
from perfab.kexec.machine import Machine, home_kernel
from perfab.kexec.state import Boot, KexecState, SideKernel, StateFile
from perfab.plan import PlannedRun
from perfab.run.schedule import Schedule, stretch
from perfab.run.session import OpenSession, Opener, Opening, open_session
from perfab.specfile import Experiment
from perfab.store import RunRecord, Store

PAUSED = "rebooting"  # a kexec session's status between boots: unfinished, claimed by no one
UNIT = "perfab-kexec.service"


@dataclass(frozen=True)
class Step:
    """What one call did, for the command's output."""

    kind: str  # switching | waiting (not switched yet) | finished | failed | interrupted | nothing
    text: str  # one line saying it
    order: tuple[str, ...] = ()  # the sides of the confirmed boots so far, in order


@dataclass(frozen=True)
class Context:
    """What a kexec session needs besides the experiment and the store."""

    machine: Machine  # the machine switched (the real one, or a test's)
    states: StateFile  # the state file that survives the reboots
    runner: Callable  # (experiment, store) -> perfab.run.runner.Runner that executes a boot's runs
    say: Callable[[str], None]  # one line for the user (or the journal)
    cache_root: Path = Path(".perfab/kernel")  # kernels built from source, and facts read from images


def begin(exp: Experiment, store: Store, ctx: Context, db: str, then: str = "reboot", machine_name: str | None = None,
          resume: bool = False, new_session: bool = False, resumer: str | None = UNIT,
          environment: dict[str, str] | None = None) -> Step:
    """Check everything, store the session (or take the unfinished one, ``resume``), switch to the first side.

    ``resumer``: the systemd unit that must be enabled to continue after a boot (None: a fleet worker's job,
    which its own service brings back); ``environment``: facts stored with the session besides the machine's
    (a fleet job's machine, class and submission)."""
    if (pending := ctx.states.read()) is not None:
        raise UsageError(f"a kexec session is in progress on this machine (experiment {pending.experiment!r}, "
                         f"session {pending.session}); it continues at each boot (perfab kexec resume), or end "
                         "it with `perfab kexec abandon`")
    now, mode, sides = check(exp, ctx, resumer)
    runner = ctx.runner(exp, store)
    opened = open_session(exp, store, _opener(runner), Opening(resume=resume, new_session=new_session,
                                                                takeover=resume))
    if environment:
        store.add_environment(opened.id, environment)
    store.finish_session(opened.id, PAUSED)
    state = KexecState(spec=str(Path(exp.path).resolve()), spec_text=exp.source, spec_hash=exp.spec_hash, db=db,
                       cwd=str(Path.cwd()), experiment=exp.name, session=opened.id, machine=machine_name,
                       then=then, file_load=mode != "none", home=now.to_dict(), sides=sides)
    return _next(state, exp, store, ctx)


def check(exp: Experiment, ctx: Context, resumer: str | None = UNIT) -> tuple[KernelIdentity, str, dict]:
    """Every check ``begin`` makes, nothing stored or switched: the running kernel, its lockdown mode and each
    side's kernel; UsageError (one line) on the first problem."""
    host = ctx.machine.host
    now = ctx.machine.running()
    problem = checks.machine_problem(host, now.release or "?", kexec=ctx.machine.kexec) or \
        checks.pmu_problem(host, _counters(exp), "this machine") or \
        (checks.resumer_problem(host, resumer) if resumer else None)
    if boot_token(now.cmdline) is not None:
        problem = (f"the running kernel was booted by a kexec session of perfab ({boot_token(now.cmdline)} on its "
                   "command line), whose sides would inherit that side's command line: reboot into the default "
                   "boot entry first")
    if problem:
        raise UsageError(problem)
    mode = checks.lockdown(host)
    return now, mode, _side_kernels(exp, ctx, mode)


def proceed(state: KexecState, exp: Experiment, store: Store, ctx: Context) -> Step:
    """What runs after a boot (see the module docstring)."""
    if exp.spec_hash != state.spec_hash:
        raise UsageError(f"{state.spec} changed since session {state.session} began; restore it to continue, "
                         "or end the session with `perfab kexec abandon`")
    if state.pending is None:
        return _next(state, exp, store, ctx)
    if state.pending.outcome == "pending" and state.pending.boot_id == ctx.machine.boot_id():
        return Step("waiting", f"the switch to side {state.pending.side} (boot {state.pending.number}) has not "
                               "happened yet: this is still the kernel that asked for it", tuple(state.order()))
    now = ctx.machine.running()
    why = _not_confirmed(state, now, time.time())
    if why is not None:
        return _fail(state, exp, store, ctx, now, why)
    return _run_boot(state, exp, store, ctx, now)


def abandon(state: KexecState, store: Store, ctx: Context) -> Step:
    """Forget the kexec session: the state file goes, the stored session stays unfinished (its runs are kept)."""
    ctx.states.remove()
    return Step("nothing", f"kexec session {state.session} of {state.experiment!r} abandoned after "
                           f"{len(state.boots)} boot(s); its runs stay in {state.db}", tuple(state.order()))


# -- the steps -------------------------------------------------------------------------------------


def _next(state: KexecState, exp: Experiment, store: Store, ctx: Context) -> Step:
    """Switch to the side of the next runs of the plan, or end the session when none is left."""
    left = boots.segments(store.remaining(state.session))
    if not left:
        return _end(state, store, ctx)
    return _switch(state, left[0], ctx)


def _switch(state: KexecState, runs: list[PlannedRun], ctx: Context) -> Step:
    """Load the side's kernel, write down the boot, boot it."""
    number = len(state.boots) + 1
    side = runs[0].variant
    token = boots.token(state.session, number)
    kernel = state.sides[side]
    line = boots.cmdline(state.home.get("cmdline", ""), kernel.cmdline, token, kernel.boot_timeout_s)
    boot = Boot(number, side, token, line, runs[0].seq, len(runs), time.time(), ctx.machine.boot_id())
    ctx.machine.load(kernel, line, state.file_load)  # a refused image leaves the state as it was
    ctx.states.write(replace(state, pending=boot))
    ctx.say(f"boot {number}: kexec into side {side} ({kernel.release or kernel.image}) for {len(runs)} run(s); "
            f"{UNIT} continues after the reboot")
    ctx.machine.switch()
    return Step("switching", f"switching to side {side} (boot {number})", tuple(state.order()))


def _run_boot(state: KexecState, exp: Experiment, store: Store, ctx: Context, now: KernelIdentity) -> Step:
    """The boot is confirmed: its runs, stored; then the next switch."""
    boot = replace(state.pending, outcome="confirmed", seconds=time.time() - state.pending.at, running=now.to_dict())
    state = replace(state, pending=boot)
    ctx.states.write(state)  # from here a reboot means the side went down during its runs
    problem = checks.pmu_problem(ctx.machine.host, _counters(exp), f"the kernel of side {boot.side}")
    if problem:
        return _fail(state, exp, store, ctx, now, problem)
    ctx.say(f"boot {boot.number}: side {boot.side} confirmed ({now.describe()}), {boot.seconds:.0f} s after the "
            "switch")
    ctx.machine.settle()
    runner = ctx.runner(exp, store)
    opened = open_session(exp, store, _opener(runner), Opening(resume=True, takeover=True))
    if opened.id != state.session:
        raise UsageError(f"the store's unfinished session of {exp.name!r} is {opened.id}, the kexec state's "
                         f"{state.session}; end one of them (perfab kexec abandon)")
    left = boots.segments(opened.schedule.runs())
    mine = left[0] if left and left[0][0].variant == boot.side else []
    try:
        result = runner.execute(OpenSession(opened.id, opened.side, Schedule(stretch(mine)), opened.busy_before,
                                            opened.replication),
                                pause=PAUSED if len(left) > (1 if mine else 0) else None)
    except PerfabError:
        _keep(state.with_boot(boot), store, ctx, remove=True)
        _leave(state, ctx)
        raise
    state = state.with_boot(boot)
    _keep(state, store, ctx)
    if result.status != "finished":
        return Step("interrupted", f"boot {boot.number} ({boot.side}) interrupted after {result.runs_done} run(s); "
                                   "`perfab kexec resume` switches to its side again", tuple(state.order()))
    if (why := _too_many_failures(exp, store, state.session)) is not None:
        store.finish_session(state.session, "aborted")
        _keep(state, store, ctx, remove=True)
        _leave(state, ctx)
        raise PerfabError(why)
    return _next(state, exp, store, ctx)


def _fail(state: KexecState, exp: Experiment, store: Store, ctx: Context, now: KernelIdentity, why: str) -> Step:
    """The pending boot's side failed: its runs stored as failed, the session aborted, the state gone."""
    boot = replace(state.pending, outcome="failed", seconds=time.time() - state.pending.at, running=now.to_dict())
    store.claim(state.session, takeover=True)
    reason = f"kexec boot {boot.number} into side {boot.side} failed: {why}"
    for planned in _boot_runs(store.remaining(state.session), boot):
        store.record_run(state.session, planned, _failed(reason))
    store.finish_session(state.session, "aborted")
    state = state.with_boot(boot)
    _keep(state, store, ctx, remove=True)
    home = KernelIdentity.from_dict(state.home)
    where = "the kernel the session began in" if now.build_id == home.build_id and now.release == home.release \
        else f"{now.describe()}, not the kernel the session began in ({home.describe()})"
    return Step("failed", f"{reason}; the session is aborted (its runs are kept); the machine runs {where}",
                tuple(state.order()))


def _end(state: KexecState, store: Store, ctx: Context) -> Step:
    """Every run is done: the session is finished; the machine does ``then``."""
    store.finish_session(state.session, "finished")
    _keep(state, store, ctx, remove=True)
    order = tuple(state.order())
    ctx.say(f"kexec session {state.session} finished: {boots.order_line(list(order))}; then {state.then}")
    _leave(state, ctx)
    return Step("finished", f"session {state.session} finished after {len(order)} boot(s): "
                            f"{boots.order_line(list(order))}", order)


def _leave(state: KexecState, ctx: Context) -> None:
    """The machine after the session: back to the kernel it began in by kexec (``home``), else ``then``."""
    if state.then != "home":
        ctx.machine.end(state.then)
        return
    home = KernelIdentity.from_dict(state.home)
    kernel = home_kernel(home)
    if kernel is None:
        ctx.say(f"the home kernel {home.release} is not in /boot: rebooting into the default entry instead")
        ctx.machine.end("reboot")
        return
    ctx.machine.load(kernel, state.home.get("cmdline", ""), state.file_load)
    ctx.machine.switch()


# -- pieces ---------------------------------------------------------------------------------------


def _not_confirmed(state: KexecState, now: KernelIdentity, at: float) -> str | None:
    """Why the running kernel is not the pending boot's, or None when it is."""
    boot, kernel = state.pending, state.sides[state.pending.side]
    if boot_token(now.cmdline) != boot.token:
        if boot.outcome == "confirmed":
            return (f"the machine went down during the side's runs and came back in {now.describe()} (its kernel "
                    "panicked, hung or was reset)")
        return (f"the machine came back in {now.describe()}, not in the kernel loaded for it (no perfab.boot="
                f"{boot.token} on the command line): the side's kernel panicked, hung or was reset, and the "
                "firmware booted the default entry")
    if kernel.build_id and now.build_id and kernel.build_id != now.build_id:
        return f"the running kernel's build id is {now.build_id}, the side's image has {kernel.build_id}"
    if kernel.release and now.release != kernel.release:
        return f"the running kernel is {now.release}, the side's image is {kernel.release}"
    took = at - boot.at
    if boot.outcome == "pending" and took > kernel.boot_timeout_s:
        return f"it came back {took:.0f} s after the switch, past its boot_timeout of {kernel.boot_timeout_s:g} s"
    return None


def _side_kernels(exp: Experiment, ctx: Context, mode: str) -> dict[str, SideKernel]:
    """Each side's kernel (built when it comes from source), read and checked; UsageError on the first problem."""
    from perfab.kernel.sides import resolve_kernel

    out = {}
    for v in exp.variants:
        image = resolve_kernel(v, ctx.cache_root, ctx.say)
        facts = image_facts(Path(image.image), Path(ctx.cache_root, "kexec"))
        if (problem := checks.side_problem(v.name, facts, mode, bool(checks.hardware_events(_counters(exp))))):
            raise UsageError(problem)
        if (note := checks.unchecked(v.name, facts)):
            ctx.say(note)
        initrd = v.kernel.initrd or _initrd_beside(Path(image.image))
        if initrd is not None and not Path(initrd).is_file():
            raise UsageError(f"side {v.name!r}: initrd {initrd} not found; fix variant.kernel.initrd")
        out[v.name] = SideKernel(str(Path(image.image).resolve()), str(Path(initrd).resolve()) if initrd else None,
                                 v.kernel.cmdline, facts.release, facts.build_id, v.kernel.boot_timeout_s)
    return out


def _initrd_beside(image: Path) -> str | None:
    """``initrd.img-VERSION`` beside ``vmlinuz-VERSION`` (Debian's /boot), when there is one."""
    if image.name.startswith("vmlinuz-"):
        candidate = image.with_name("initrd.img-" + image.name.removeprefix("vmlinuz-"))
        if candidate.is_file():
            return str(candidate)
    return None


def _counters(exp: Experiment) -> tuple[str, ...]:
    """The perf events the spec counts (none for backends that count none)."""
    return tuple(exp.measure.counters)


def _opener(runner) -> Opener:
    return Opener(runner.backend, runner.sides, runner.environment, runner.real, runner.say)


def _boot_runs(remaining: list[PlannedRun], boot: Boot) -> list[PlannedRun]:
    """The runs a boot was to carry that are still to run."""
    mine = [p for p in remaining if p.seq >= boot.first_seq and p.variant == boot.side]
    return sorted(mine, key=lambda p: p.seq)[:boot.runs]


def _failed(reason: str) -> RunRecord:
    return RunRecord("failed", reason, time.time(), None, None, None, None, None, None, None, None, False, b"", b"",
                     0, 0)


def _keep(state: KexecState, store: Store, ctx: Context, remove: bool = False) -> None:
    """Keep the boots in the session's environment (what the report's SETUP reads) and the state file."""
    order = [f"{b.number}:{b.side}:{b.outcome}" for b in state.boots]
    try:
        store.add_environment(state.session, {"kexec.boots": " ".join(order)})
    except PerfabError as e:
        ctx.say(f"warning: could not store the boot order ({e})")
    if remove:
        ctx.states.remove()
    else:
        ctx.states.write(state)


def _too_many_failures(exp: Experiment, store: Store, session: int) -> str | None:
    """The session's failure policy over all its boots (each boot's runner sees only its own runs)."""
    rows = [r for r in store.run_rows(exp.name) if r["session"] == session and not r["warmup"]]
    failed = [r for r in rows if r["status"] == "failed"]
    planned = sum(1 for p in store.planned(session) if not p.warmup)
    limit = exp.max_failures if exp.max_failures is not None else max(3, planned // 4)
    if len(failed) <= limit:
        return None
    return (f"aborted after {len(failed)} failed runs over the session's boots (last: {failed[-1]['reason']}); fix "
            "the workload or raise experiment.max_failures, then `perfab run SPEC --resume`")
