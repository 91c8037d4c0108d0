"""Executing one command: the seam between the runner and the operating system.

``RealExecutor`` forks the command in a new session (its own process group),
pinned with ``sched_setaffinity`` when asked, and then sleeps in
``os.wait4`` until it ends: nothing polls on the measured CPUs.  Two reader
threads block on the stdout and stderr pipes, keep the first ``cap_bytes``
of each verbatim and count the rest; a timer thread kills the process group
at the timeout.  ``wait4`` gives the child's rusage (user and system time,
peak RSS, context switches).

``FakeExecutor`` answers without running anything, so the scheduler, the
store and the report can be tested deterministically: ``sleep 1.5`` takes
exactly 1.5 s, as in hyperfine's mock executor.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol


@dataclass(frozen=True)
class Execution:
    """What one execution of a command did."""

    status: int | None  # raw wait status; None when the command could not start
    wall_s: float  # from spawn to reap
    user_s: float  # user CPU time (rusage of the reaped child)
    sys_s: float  # system CPU time
    max_rss_kb: int  # peak resident set size, KiB
    nvcsw: int  # voluntary context switches
    nivcsw: int  # involuntary context switches
    timed_out: bool  # killed at the timeout
    stdout: bytes  # first cap_bytes of stdout
    stderr: bytes  # first cap_bytes of stderr
    stdout_bytes: int  # total stdout bytes
    stderr_bytes: int  # total stderr bytes
    error: str | None = None  # why the command could not start

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


class _Drain(threading.Thread):
    """Reads a pipe to EOF, keeping the first ``cap`` bytes and counting all."""

    def __init__(self, fd: int, cap: int):
        super().__init__(daemon=True)
        self.fd, self.cap = fd, cap
        self.kept = bytearray()
        self.total = 0

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                self.total += len(chunk)
                room = self.cap - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
        except OSError:
            pass
        finally:
            os.close(self.fd)


class RealExecutor:
    """Runs commands for real; see the module docstring."""

    def __init__(self) -> None:
        self._pgid: int | None = None

    def interrupt(self) -> None:
        pgid = self._pgid
        if pgid is not None:
            _killpg(pgid, signal.SIGKILL)

    def execute(self, argv: list[str], env: dict[str, str], cwd: str | None, timeout_s: float,
                cap_bytes: int, cpus: set[int] | None) -> Execution:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        started = time.perf_counter()
        try:
            proc = self._spawn(argv, env, cwd, out_w, err_w, cpus)
        except OSError as e:
            for fd in (out_r, err_r):
                os.close(fd)
            return Execution(None, 0.0, 0.0, 0.0, 0, 0, 0, False, b"", b"", 0, 0,
                             error=f"cannot execute {argv[0]!r}: {e.strerror or e}")
        finally:
            os.close(out_w)
            os.close(err_w)
        self._pgid = proc.pid
        drains = [_Drain(out_r, cap_bytes), _Drain(err_r, cap_bytes)]
        for d in drains:
            d.start()
        expired = threading.Event()
        timer = threading.Timer(timeout_s, self._expire, (proc.pid, expired))
        timer.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        timer.cancel()
        proc.returncode = status  # reaped here; keeps Popen from waiting again
        self._pgid = None
        _killpg(proc.pid, signal.SIGKILL)  # leftovers would disturb the next run and hold the pipes
        for d in drains:
            d.join(timeout=5)
        return Execution(status, wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss, ru.ru_nvcsw, ru.ru_nivcsw,
                         expired.is_set(), bytes(drains[0].kept), bytes(drains[1].kept), drains[0].total,
                         drains[1].total)

    @staticmethod
    def _spawn(argv, env, cwd, out_w, err_w, cpus) -> subprocess.Popen:
        # Affinity is inherited through fork: pin this thread, fork, restore.
        previous = os.sched_getaffinity(0) if cpus else None
        try:
            if cpus:
                os.sched_setaffinity(0, cpus)
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, env=env,
                                    cwd=cwd, start_new_session=True, close_fds=True)
        finally:
            if previous is not None:
                os.sched_setaffinity(0, previous)

    def _expire(self, pgid: int, expired: threading.Event) -> None:
        expired.set()
        _killpg(pgid, signal.SIGKILL)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(frozen=True)
class FakeOutcome:
    """What a fake execution returns."""

    wall_s: float = 0.0  # reported elapsed time
    stdout: bytes = b""  # reported stdout
    stderr: bytes = b""  # reported stderr
    exit_code: int = 0  # reported exit status
    signal: int | None = None  # reported killing signal, overrides exit_code
    timed_out: bool = False  # reported timeout
    user_s: float | None = None  # reported user time, default wall_s
    error: str | None = None  # could not start


def sleep_behaviour(argv: list[str], env: dict[str, str]) -> FakeOutcome:
    """``sleep N`` takes exactly N seconds; anything else takes no time."""
    if len(argv) >= 2 and os.path.basename(argv[0]) == "sleep":
        return FakeOutcome(wall_s=float(argv[1]))
    return FakeOutcome()


@dataclass
class FakeExecutor:
    """Answers from ``behaviour`` without running anything; records every call."""

    behaviour: Callable[[list[str], dict[str, str]], FakeOutcome] = sleep_behaviour
    calls: list[tuple[list[str], dict[str, str], str | None]] = field(default_factory=list)

    def interrupt(self) -> None:
        pass

    def execute(self, argv, env, cwd, timeout_s, cap_bytes, cpus) -> Execution:
        self.calls.append((list(argv), dict(env), cwd))
        o = self.behaviour(list(argv), dict(env))
        if o.error:
            return Execution(None, 0.0, 0.0, 0.0, 0, 0, 0, False, b"", b"", 0, 0, error=o.error)
        status = o.signal if o.signal is not None else (o.exit_code << 8)
        user = o.wall_s if o.user_s is None else o.user_s
        return Execution(status, o.wall_s, user, 0.0, 1024, 0, 0, o.timed_out, o.stdout[:cap_bytes],
                         o.stderr[:cap_bytes], len(o.stdout), len(o.stderr))
