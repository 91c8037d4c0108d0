"""The kexec driver's context on this machine: the real machine, and a runner with the real executor."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def real_context(states, stderr=None, say=None):
    """The driver's context on this machine: the real machine, a runner with the real executor per store;
    lines go to ``say``, else to ``stderr`` (``perfab kexec``, ``perfab run`` on a kexec spec, a fleet job)."""
    from perfab.kexec.driver import Context
    from perfab.kexec.machine import RealMachine
    from perfab.machine import snapshot
    from perfab.run.backends import make_backend
    from perfab.run.executor import RealExecutor
    from perfab.run.runner import Runner

    def to_stderr(line: str) -> None:
        print(f"perfab: {line}", file=stderr, flush=True)

    say = say or to_stderr
    with RealExecutor() as executor:
        def runner(exp, store):
            return Runner(exp, store, make_backend(exp.measure), executor, snapshot(), say=say)

        yield Context(RealMachine(), states, runner, say)
