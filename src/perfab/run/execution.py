"""What one execution of a command did, and the seam the runner executes commands through.

``Executor`` is implemented by ``perfab.run.executor.RealExecutor`` (real
processes, through the fork server or spawned directly by
``perfab.run.direct``) and ``FakeExecutor`` (nothing runs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from perfab.machine.busy import CpuWindow


@dataclass(frozen=True)
class Execution:
    """What one execution of a command did."""

    status: int | None  # raw wait status; None when the command could not start
    wall_s: float  # from spawn to reap
    user_s: float  # user CPU time (rusage of the reaped child)
    sys_s: float  # system CPU time
    max_rss_kb: int | None  # peak resident set size, KiB; None when it cannot be told from perfab's own
    nvcsw: int  # voluntary context switches
    nivcsw: int  # involuntary context switches
    timed_out: bool  # killed at the timeout
    stdout: bytes  # first cap_bytes of stdout
    stderr: bytes  # first cap_bytes of stderr
    stdout_bytes: int  # total stdout bytes
    stderr_bytes: int  # total stderr bytes
    error: str | None = None  # why the command could not start
    stderr_tail: bytes = b""  # the last TAIL_BYTES of stderr (where perf reports a signal death)
    window: CpuWindow | None = None  # the machine's CPU counters around the run; None when not read

    @property
    def exit_code(self) -> int | None:
        if self.status is None or not os.WIFEXITED(self.status):
            return None
        return os.WEXITSTATUS(self.status)

    @property
    def signal(self) -> int | None:
        if self.status is None or not os.WIFSIGNALED(self.status):
            return None
        return os.WTERMSIG(self.status)


class Executor(Protocol):
    def execute(self, argv: list[str], env: dict[str, str], cwd: str | None, timeout_s: float,
                cap_bytes: int, cpus: set[int] | None) -> Execution:
        """Run ``argv`` to completion (or timeout) and report what happened."""
        ...

    def interrupt(self) -> None:
        """Kill the command in flight, if any (called from a signal handler)."""
        ...


def not_started(argv: list[str], why: str) -> Execution:
    """An execution that could not start, and why."""
    what = repr(argv[0]) if argv else "an empty command"
    return Execution(None, 0.0, 0.0, 0.0, 0, 0, 0, False, b"", b"", 0, 0, error=f"cannot execute {what}: {why}")


def killpg(pgid: int, sig: int) -> None:
    """Signal a process group that may be gone already."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
