"""A fleet job whose sides kexec: one experiment carried across the reboots of its lab machine.

The job runs ``perfab.kexec.driver`` as ``perfab kexec`` would on a single
machine, with the worker in place of the systemd unit: the machine's
``perfab worker`` service starts at every boot, and the job comes back to
it.  After each switch of kernel the job raises ``Rebooting``: the retry
strategy (``perfab.fleet.job.Moves``) puts it back into this machine's own
queue, first in line, to be taken again ``REBOOT_S`` later, by when the
machine has gone down and come back.  The job taken again continues the
session (confirms the kernel, runs the boot's runs, switches again).  One
taken again before the machine went down finds the same boot id, does
nothing and is put back again.  A side that failed fails the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfab.errors import PerfabError
from perfab.fleet.queues import BelongsElsewhere

if TYPE_CHECKING:  # the job's context: perfab.fleet.job runs this module, which must not import it back
    from perfab.fleet.job import Context

REBOOT_S = 60  # seconds before a job put back by its own switch of kernel is taken again


class Rebooting(BelongsElsewhere):
    """The job's machine is switching kernel: the job waits in that machine's queue for it to come back."""

    def __init__(self, machine: str, what: str):
        super().__init__(machine)
        self.args = (f"{what}; continues on machine {machine} after its reboot",)


def kexec_sides(exp) -> bool:
    """The experiment's sides are kernels this machine kexecs into."""
    return any(v.kernel is not None and v.kernel.boot == "kexec" for v in exp.variants)


def run_kexec(ctx: Context, store, exp, resume: bool, environment: dict[str, str], kexec_context=None) -> str:
    """Begin or continue the experiment's kexec session on this machine; a line saying what happened.

    ``environment``: what a new session stores (the machine, its class, the submission); ``kexec_context``:
    the driver's context (a test's machine); None: this machine, with a real runner."""
    from perfab.kexec.context import real_context
    from perfab.kexec.state import StateFile, state_dir

    if kexec_context is not None:
        return _step(ctx, store, exp, resume, environment, kexec_context)
    with real_context(StateFile(state_dir()), say=ctx.say) as kctx:
        return _step(ctx, store, exp, resume, environment, kctx)


def _step(ctx: Context, store, exp, resume: bool, environment: dict[str, str], kctx) -> str:
    from perfab.kexec import driver

    state = kctx.states.read()
    if state is not None and state.experiment != exp.name:
        raise PerfabError(f"machine {ctx.machine} is in the kexec session of {state.experiment!r}; it takes "
                          "another experiment once that one ends")
    if state is not None:
        step = driver.proceed(state, exp, store, kctx)
    else:
        step = driver.begin(exp, store, kctx, ctx.db, "reboot", ctx.machine, resume, not resume, resumer=None,
                            environment=environment)
    if step.kind in ("switching", "waiting"):
        raise Rebooting(ctx.machine, step.text)
    if step.kind == "failed":
        raise PerfabError(step.text)
    return f"{exp.name}: {step.text}"
