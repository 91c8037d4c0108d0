"""Executing one command: the seam between the runner and the operating system.

``RealExecutor`` runs each command in a new session (its own process group),
pinned with ``sched_setaffinity`` when asked, through a small fork server
(``perfab-exec``, see ``trampoline``) started on the first run and kept for
the executor's life, so that rusage, max RSS above all, is the workload's
own and no run pays for an extra exec.  A run is one request and one reply:
the server reads the workload's stdout and stderr itself (the first
``cap_bytes`` of each kept verbatim, the rest counted), kills its process
group at the timeout, kills whatever it left behind, even processes that
left its session, reads the pipes for at most ``GRACE_S`` more (a writer
that escaped cannot hold a run open or delay the next one), and reports
the wait status, the rusage (user and system time, peak RSS, context
switches), the output and the machine's CPU counters around the run
(``Execution.window``, for ``perfab.machine.busy``).  Meanwhile perfab
sleeps in one blocking ``recv``: nothing polls on the measured CPUs, and
nothing of perfab's runs between the fork and the reap.  A run's request
is encoded once per side (its command, environment and limits repeat).
Without a C compiler the command is spawned directly (``perfab.run.direct``).

A string exec cannot take (a NUL byte, a bad environment name) gives an
``Execution`` whose ``error`` names it.

``FakeExecutor`` answers without running anything, so the scheduler, the
store and the report can be tested deterministically: ``sleep 1.5`` takes
exactly 1.5 s, as in hyperfine's mock executor.
"""

from __future__ import annotations

import os
import signal
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import Callable

from perfab.run.direct import DirectSpawner
from perfab.run.execution import Execution, Executor, not_started
from perfab.run.trampoline import (GRACE_S, TAIL_BYTES, CannotStart, ForkServer, NotSent, Reply, ServerGone,
                                   encode_env, encode_request, execution, helper_path)

__all__ = ["Execution", "Executor", "FakeExecutor", "FakeOutcome", "GRACE_S", "RealExecutor", "TAIL_BYTES",
           "sleep_behaviour"]


class RealExecutor:
    """Runs commands for real; see the module docstring.  ``close()`` (or garbage collection) ends its server."""

    resolves_programs = True  # execs programs: a spec's programs are checked before a session starts

    def __init__(self, use_helper: bool = True) -> None:
        self.use_helper = use_helper  # run through the perfab-exec server so rusage is the workload's own
        self._server: ForkServer | None = None
        self._stop_server: weakref.finalize | None = None  # also run when the executor is collected
        self._direct: DirectSpawner | None = None  # without a server: spawned from perfab itself
        self._env: tuple[dict[str, str] | None, bytes] = (None, b"")  # the last environment, encoded
        self._request: tuple[tuple, bytes] | None = None  # the last request: what it encodes, and its bytes
        self._own_cpu = True  # read perfab's CPU time around a run: the server could not (or has not yet)

    @property
    def server_pid(self) -> int | None:
        """The pid of the running perfab-exec server, None before the first run or after ``close``."""
        return self._server.pid if self._server is not None and not self._server.closed else None

    def close(self) -> None:
        """Stop the server (or the direct path's watch thread); a later ``execute`` starts it again."""
        self._drop_server()
        if self._direct is not None:
            self._direct.close()

    def __enter__(self) -> "RealExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def interrupt(self) -> None:
        if self._server is not None:
            self._server.kill()
        if self._direct is not None:
            self._direct.interrupt()

    def execute(self, argv: list[str], env: dict[str, str], cwd: str | None, timeout_s: float,
                cap_bytes: int, cpus: set[int] | None) -> Execution:
        server = self._fork_server()
        if server is None:
            self._direct = self._direct or DirectSpawner()
            return self._direct.execute(argv, env, cwd, timeout_s, cap_bytes, cpus)
        try:
            request = self._encode(argv, env, cwd or _here(), timeout_s, cap_bytes, cpus)
        except ValueError as e:  # a string exec cannot take: refused before sending
            return not_started(argv, str(e))
        own = time.process_time() if self._own_cpu else 0.0
        try:
            done = self._run(server, request)
        except (CannotStart, NotSent) as e:
            return not_started(argv, _why(e, cwd))
        except ServerGone as e:  # killed during the run: the run cannot be told
            self._drop_server()
            return Execution(None, 0.0, 0.0, 0.0, 0, 0, 0, False, b"", b"", 0, 0,
                             error=f"perfab-exec exited during the run of {argv[0]!r} ({e}); run it again")
        except BaseException:  # ^C: out of step; at EOF the server kills what it started
            self._drop_server()
            raise
        own_cpu_s = time.process_time() - own if self._own_cpu else 0.0
        self._own_cpu = not done.harness_known  # the server reads perfab's CPU time itself when it can
        return execution(done, own_cpu_s)

    def _encode(self, argv, env, cwd: str, timeout_s: float, cap_bytes: int, cpus) -> bytes:
        """The request for this run: the last one again when nothing changed (the runs of a side repeat)."""
        if env != self._env[0]:
            self._env, self._request = (dict(env), encode_env(env)), None
        key = (tuple(argv), cwd, tuple(sorted(cpus)) if cpus else None, timeout_s, cap_bytes)
        if self._request is None or self._request[0] != key:
            self._request = (key, encode_request(argv, self._env[1], cwd, cpus, cap_bytes, timeout_s))
        return self._request[1]

    def _run(self, server: ForkServer, request: bytes) -> Reply:
        """The run's reply; a server found dead before the request (killed between runs) is replaced once."""
        try:
            return server.run(request)
        except NotSent:
            self._drop_server()
            replacement = self._fork_server()
            if replacement is None:
                raise
            return replacement.run(request)

    def _fork_server(self) -> ForkServer | None:
        """The running server, started on first use; None when there is none to be had."""
        if self._server is not None or not self.use_helper:
            return self._server
        helper = helper_path()
        if helper is None:
            self.use_helper = False
            return None
        try:
            self._server = ForkServer(helper)
        except OSError:  # e.g. a cache directory mounted noexec
            self.use_helper = False
            return None
        self._stop_server = weakref.finalize(self, self._server.close)
        return self._server

    def _drop_server(self) -> None:
        if self._stop_server is not None:
            self._stop_server()  # closes the server, once
        self._server = self._stop_server = None
        self._own_cpu = True


def _why(e: CannotStart | ServerGone, cwd: str | None) -> str:
    if isinstance(e, ServerGone):
        return f"perfab-exec exited ({e}); run it again"
    text = os.strerror(e.errno)
    if e.stage == "chdir":
        return f"cannot enter {cwd!r}: {text}"
    if e.stage == "affinity":
        return f"cannot pin it to the CPUs asked for: {text}"
    return text


def _here() -> str:
    """perfab's working directory, sent with every run (the server's may be stale); '' if deleted."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return ""


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
    """Answers from ``behaviour`` without running anything; records every call.

    An outcome longer than the timeout comes back as the real executor's
    would: killed by SIGKILL at the timeout, ``timed_out`` and ``wall_s``
    equal to the timeout.
    """

    resolves_programs = False  # runs nothing: programs named in a spec need not exist

    behaviour: Callable[[list[str], dict[str, str]], FakeOutcome] = sleep_behaviour
    calls: list[tuple[list[str], dict[str, str], str | None]] = field(default_factory=list)

    def interrupt(self) -> None:
        pass

    def execute(self, argv, env, cwd, timeout_s, cap_bytes, cpus) -> Execution:
        self.calls.append((list(argv), dict(env), cwd))
        o = self.behaviour(list(argv), dict(env))
        if o.error:
            return Execution(None, 0.0, 0.0, 0.0, 0, 0, 0, False, b"", b"", 0, 0, error=o.error)
        user = o.wall_s if o.user_s is None else o.user_s
        if o.wall_s > timeout_s:
            o, user = replace(o, wall_s=timeout_s, timed_out=True, signal=signal.SIGKILL), min(user, timeout_s)
        status = o.signal if o.signal is not None else (o.exit_code << 8)
        return Execution(status, o.wall_s, user, 0.0, 1024, 0, 0, o.timed_out, o.stdout[:cap_bytes],
                         o.stderr[:cap_bytes], len(o.stdout), len(o.stderr), stderr_tail=o.stderr[-TAIL_BYTES:])
