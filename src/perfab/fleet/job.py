"""One job: run one experiment on this machine with the normal runner, into the shared store.

An experiment's runs all come from one machine (an A/B comparison across
two machines would measure the machines).  So before it runs anything a
worker decides (``route``) what the job is to this machine:

- ``new``: no session of this experiment anywhere: start one here;
- ``resume``: this machine began this submission and did not finish it
  (its worker was killed, the machine rebooted): continue the stored plan;
  the worker holds the machine's lock, so a claim left by an earlier
  worker of this machine is stale and is taken over;
- ``done``: this submission finished here already (the job was delivered
  twice): nothing to run;
- ``elsewhere``: another machine holds an unfinished session of it: the
  job moves to that machine's own queue (``BelongsElsewhere`` and the
  retry strategy ``Moves``), to be resumed there.

An experiment finished by another machine is not run here at all: the
job fails with a line saying to submit it under another name.  An
experiment whose sides kexec goes on across this machine's reboots
(``perfab.fleet.kexecjob``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from perfab.errors import PerfabError, UsageError
from perfab.fleet.machines import CLASS_KEY, MACHINE_KEY, SUBMISSION_KEY
from perfab.fleet.queues import RESUME_PRIORITY, BelongsElsewhere, class_of, machine_queue


@dataclass(frozen=True)
class Context:
    """What a worker hands every job it runs."""

    db: str  # the shared store's URL
    machine: str  # this machine's name (the store's identity for claims and resumes)
    machine_class: str  # the class this worker serves
    say: Callable[[str], None]  # one line to the worker's log


@dataclass(frozen=True)
class Route:
    """What a job is to this machine (see the module docstring)."""

    kind: str  # new | resume | done | elsewhere
    machine: str | None = None  # for elsewhere: the machine whose session it is
    session: int | None = None  # for resume and done: the session


class JobFailed(Exception):
    """The experiment cannot run (a bad spec, too many failed runs): the job fails and is not retried."""


def route(store, experiment: str, submission: str) -> Route:
    """What the job running ``submission`` of ``experiment`` is to the machine ``store`` acts for."""
    try:
        sessions = store.sessions(experiment)
    except UsageError:  # no such experiment yet
        sessions = []
    others = [s for s in sessions if s.host != store.machine]
    if others:
        unfinished = [s for s in others if s.status != "finished" and store.remaining(s.id)]
        if unfinished:
            return Route("elsewhere", machine=unfinished[-1].host)
        raise UsageError(f"experiment {experiment!r} was run on machine {others[-1].host}; its runs there must not "
                         "be pooled with this machine's: submit it under another experiment name")
    mine = [s for s in sessions if s.environment.get(SUBMISSION_KEY) == submission]
    for s in reversed(mine):
        if s.status != "finished" and store.remaining(s.id):
            return Route("resume", session=s.id)
        return Route("done", session=s.id)
    return Route("new")


def run_experiment(ctx: Context, spec_text: str, spec_path: str, experiment: str, submission: str) -> str:
    """Run the job on this machine; a line saying what happened (JobFailed, BelongsElsewhere otherwise)."""
    from perfab.store import open_store

    try:
        with open_store(ctx.db, machine=ctx.machine) as store:
            where = route(store, experiment, submission)
            if where.kind == "elsewhere":
                raise BelongsElsewhere(where.machine)
            if where.kind == "done":
                return f"{experiment}: session {where.session} finished already; nothing to run"
            result = _run(ctx, store, spec_text, spec_path, submission, resume=where.kind == "resume")
    except PerfabError as e:
        raise JobFailed(f"{experiment}: {e}") from None
    if isinstance(result, str):  # a kexec session's step
        return result
    return f"{experiment}: session {result.session} {result.status} ({result.runs_done} runs here)"


def _run(ctx: Context, store, spec_text: str, spec_path: str, submission: str, resume: bool):
    from perfab.machine import snapshot
    from perfab.run.backends import make_backend
    from perfab.run.executor import RealExecutor
    from perfab.run.runner import Runner
    from perfab.specfile import parse_spec

    exp = parse_spec(spec_text, spec_path)
    environment = {**snapshot(), MACHINE_KEY: ctx.machine, CLASS_KEY: ctx.machine_class, SUBMISSION_KEY: submission}
    from perfab.fleet.kexecjob import kexec_sides, run_kexec

    if kexec_sides(exp):  # the sides are kernels: the session goes on across this machine's reboots
        return run_kexec(ctx, store, exp, resume, environment)
    with RealExecutor() as executor:
        runner = Runner(exp, store, make_backend(exp.measure), executor, environment, say=ctx.say)
        return runner.run(resume=resume, new_session=not resume, takeover=resume)


class Moves:
    """Procrastinate's retry strategy for perfab's jobs: a job that belongs elsewhere moves to that machine.

    Nothing else is retried by the strategy: a failed experiment stays failed (its stored runs stay and
    ``perfab run --resume`` or a new submission continues it); a worker that died mid-job is another
    matter, handled by ``perfab.fleet.worker``'s sweep of stalled jobs.
    """

    def get_retry_exception(self, exception: BaseException, job):
        from procrastinate import RetryDecision, exceptions

        from perfab.fleet.kexecjob import REBOOT_S, Rebooting

        machine_class = class_of(job.queue)
        if not isinstance(exception, BelongsElsewhere) or machine_class is None:
            return None
        later = {"retry_in": {"seconds": REBOOT_S}} if isinstance(exception, Rebooting) else {}
        decision = RetryDecision(queue=machine_queue(machine_class, exception.machine), priority=RESUME_PRIORITY,
                                 **later)
        return exceptions.JobRetry(retry_decision=decision)
