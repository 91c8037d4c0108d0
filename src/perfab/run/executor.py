"""Executing one command: the seam between the runner and the operating system.

``RealExecutor`` runs each command in a new session (its own process group),
pinned with ``sched_setaffinity`` when asked, through a small fork server
(``perfab-exec``, see ``trampoline``) started on the first run and kept for
the executor's life, so that rusage, max RSS above all, is the workload's
own and no run pays for an extra exec.  The server is a child subreaper and
kills whatever the workload left behind, even processes that left its
session, before it reports the child's wait status and rusage (user and
system time, peak RSS, context switches).  Meanwhile perfab sleeps in one
blocking poll(2) on the stdout and stderr pipes and the server's socket
(nothing polls on the measured CPUs, and no thread is woken per run): it
keeps the first ``cap_bytes`` of each stream verbatim, counts the rest, and
kills the process group at the timeout (the server then kills the rest).
Once the report is in, the pipes are read for at most ``GRACE_S`` more, so
a writer that escaped cannot hold a run open or delay the next one.
Without a C compiler the command is spawned directly with posix_spawn and
reaped with ``os.wait4``; only its process group can be killed then, and
one long-lived watch thread reads the pipes the same way.

A string exec cannot take (a NUL byte, a bad environment name) gives an
``Execution`` whose ``error`` names it.

``FakeExecutor`` answers without running anything, so the scheduler, the
store and the report can be tested deterministically: ``sleep 1.5`` takes
exactly 1.5 s, as in hyperfine's mock executor.
"""

from __future__ import annotations

import math
import os
import queue
import resource
import select
import selectors
import shutil
import signal
import threading
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol, TypeVar

from perfab.run.trampoline import CannotStart, ForkServer, Report, ServerGone, helper_path, unusable_string


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


TAIL_BYTES = 4096
T = TypeVar("T")
GRACE_S = 0.25  # how long the pipes are still read once the workload is reaped


class _Watch:
    """One run's output and deadline: drains stdout and stderr, blocked in select(2).

    Keeps the first ``cap`` bytes of each stream and counts the rest.  At
    the deadline it kills the process group.  On the watch thread (``run``),
    ``reaped()`` (the child is reaped) wakes it through the watcher's
    eventfd ``wake``; in the caller's thread (``inline``) the server's report
    ends the wait.  Either way it reads what is left for at most ``GRACE_S``,
    then closes the pipes even if a process that escaped still holds their
    other end.
    """

    def __init__(self, fds: tuple[int, int], cap: int, timeout_s: float, pgid: int, wake: int):
        self.fds, self.cap, self.pgid, self.wake = fds, cap, pgid, wake
        self.deadline = time.monotonic() + timeout_s
        self.grace_end: float | None = None  # GRACE_S after the reap was seen
        self.kept = {fd: bytearray() for fd in fds}
        self.total = {fd: 0 for fd in fds}
        self.tail = {fd: b"" for fd in fds}
        self.done = threading.Event()  # set by the executor once the child is reaped
        self.finished = threading.Event()  # set here once the pipes are closed
        self.expired = False

    def reaped(self) -> None:
        self.done.set()
        os.eventfd_write(self.wake, 1)

    def run(self) -> None:
        try:
            with selectors.DefaultSelector() as sel:
                for fd in self.fds:
                    sel.register(fd, selectors.EVENT_READ)
                sel.register(self.wake, selectors.EVENT_READ)
                while len(sel.get_map()) > 1 and self._select(sel):
                    pass
            if not self.expired and not self.done.wait(max(0.0, self.deadline - time.monotonic())):
                self._expire()
        finally:
            for fd in self.fds:
                os.close(fd)
            self.finished.set()

    def _select(self, sel: selectors.BaseSelector) -> bool:
        """Wait for output, the reap or the next limit; False once the grace after the reap is over."""
        if self.done.is_set():
            if self.grace_end is None:
                self.grace_end = time.monotonic() + GRACE_S
            limit: float | None = self.grace_end
        else:
            limit = None if self.expired else self.deadline  # after the kill: until the reap
        timeout = None if limit is None else limit - time.monotonic()
        if timeout is not None and timeout <= 0:
            if self.done.is_set():
                return False
            self._expire()
            return True
        for key, _ in sel.select(timeout):
            if key.fd == self.wake:
                try:
                    os.eventfd_read(self.wake)
                except BlockingIOError:
                    pass
            else:
                self._read(sel, key.fd)
        return True

    def _read(self, sel: selectors.BaseSelector, fd: int) -> None:
        if not self._take(fd):
            sel.unregister(fd)

    def _take(self, fd: int) -> bool:
        """Read what ``fd`` holds (keep, count, tail); False at its end."""
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return False
        self.total[fd] += len(chunk)
        self.tail[fd] = (self.tail[fd] + chunk)[-TAIL_BYTES:]
        room = self.cap - len(self.kept[fd])
        if room > 0:
            self.kept[fd] += chunk[:room]
        return True

    def inline(self, reply_fd: int, finish: Callable[[], T]) -> T:
        """The same watch in the calling thread, for a run the fork server reports on ``reply_fd``.

        One poll(2) waits for output, the server's report and the deadline together; once ``reply_fd``
        is readable, ``finish()`` reads the report, and the pipes are read for at most ``GRACE_S``
        more.  The pipes are closed however it ends; ``finish``'s exception (the server gone) passes.
        """
        poller = select.poll()
        live = set(self.fds)
        for fd in (*self.fds, reply_fd):
            poller.register(fd, select.POLLIN)
        try:
            result: tuple[bool, T | None] = (False, None)
            while not result[0]:
                for fd, _ in poller.poll(self._wait_ms()):
                    if fd == reply_fd:
                        result = (True, finish())
                    elif not self._take(fd):
                        poller.unregister(fd)
                        live.discard(fd)
                if not result[0] and not self.expired and time.monotonic() >= self.deadline:
                    self._expire()
            self.done.set()
            self._drain(poller, live)
            return result[1]  # type: ignore[return-value]
        finally:
            for fd in self.fds:
                os.close(fd)
            self.finished.set()

    def _wait_ms(self) -> int | None:
        """poll(2)'s timeout until the deadline (rounded up); None (no limit) once the run was killed."""
        if self.expired:
            return None
        return max(0, math.ceil((self.deadline - time.monotonic()) * 1000))

    def _drain(self, poller, live: set[int]) -> None:
        """After the report: read the pipes until their end, for at most ``GRACE_S``."""
        grace_end = time.monotonic() + GRACE_S
        while live:
            left = grace_end - time.monotonic()
            if left <= 0:
                return
            for fd, _ in poller.poll(math.ceil(left * 1000)):
                if fd in live and not self._take(fd):
                    poller.unregister(fd)
                    live.discard(fd)

    def _expire(self) -> None:
        if not self.done.is_set():
            self.expired = True
            _killpg(self.pgid, signal.SIGKILL)


class _Watcher(threading.Thread):
    """A long-lived thread that serves one ``_Watch`` at a time (starting a thread per run costs ~0.5 ms)."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="perfab-watch")
        self.jobs: queue.SimpleQueue[_Watch | None] = queue.SimpleQueue()
        self.wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # written at each reap

    def run(self) -> None:
        try:
            while (job := self.jobs.get()) is not None:  # None: the executor was closed
                job.run()
        finally:
            os.close(self.wake)


class RealExecutor:
    """Runs commands for real; see the module docstring.  ``close()`` (or garbage collection) ends its server."""

    resolves_programs = True  # execs programs: a spec's programs are checked before a session starts

    def __init__(self, use_helper: bool = True) -> None:
        self.use_helper = use_helper  # run through the perfab-exec server so rusage is the workload's own
        self._pgid: int | None = None
        self._watcher: _Watcher | None = None
        self._server: ForkServer | None = None
        self._stop_watcher: weakref.finalize | None = None  # also run when the executor is collected
        self._stop_server: weakref.finalize | None = None

    @property
    def server_pid(self) -> int | None:
        """The pid of the running perfab-exec server, None before the first run or after ``close``."""
        return self._server.pid if self._server is not None and not self._server.closed else None

    def close(self) -> None:
        """Stop the server and the watch thread; a later ``execute`` starts them again."""
        self._drop_server()
        self._drop_watcher()

    def _drop_watcher(self) -> None:
        if self._stop_watcher is not None:
            self._stop_watcher()  # the thread ends after its current watch
        self._watcher = self._stop_watcher = None

    def __enter__(self) -> "RealExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def interrupt(self) -> None:
        pgid = self._pgid
        if pgid is not None:
            _killpg(pgid, signal.SIGKILL)

    def execute(self, argv: list[str], env: dict[str, str], cwd: str | None, timeout_s: float,
                cap_bytes: int, cpus: set[int] | None) -> Execution:
        server = self._fork_server()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if server is None:
            return self._direct(argv, env, cwd, timeout_s, cap_bytes, cpus, (out_r, out_w, err_r, err_w))
        try:
            server, pid = self._start(server, argv, env, cwd or _here(), cpus, out_w, err_w)
        except BaseException as e:
            os.close(out_r)
            os.close(err_r)
            if isinstance(e, (CannotStart, ServerGone)):
                return _not_started(argv, _why(e, cwd))
            if isinstance(e, ValueError):  # a string exec cannot take: refused before sending
                return _not_started(argv, str(e))
            self._drop_server()  # mid-request (^C): out of step; at EOF the server kills what it started
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        self._pgid = pid
        watch = _Watch((out_r, err_r), cap_bytes, timeout_s, pid, -1)
        try:
            status, report = watch.inline(server.sock.fileno(), server.finish)  # no thread: one poll(2)
        except BaseException as e:  # KeyboardInterrupt, or the server killed: the run cannot be told
            _killpg(pid, signal.SIGKILL)
            self._drop_server()
            if isinstance(e, ServerGone):
                return Execution(None, 0.0, 0.0, 0.0, 0, 0, 0, False, b"", b"", 0, 0,
                                 error=f"perfab-exec exited during the run of {argv[0]!r} ({e}); run it again")
            raise
        finally:
            self._pgid = None  # the server killed what was left of the workload before reporting
        return _execution(watch, status, report)

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

    def _start(self, server: ForkServer, argv, env, cwd, cpus, out_w, err_w) -> tuple[ForkServer, int]:
        """Start the run: the server that runs it and the pid; a dead server (killed) is replaced once."""
        try:
            return server, server.start(argv, env, cwd, cpus, out_w, err_w)
        except ServerGone:
            self._drop_server()
            replacement = self._fork_server()
            if replacement is None:
                raise
            return replacement, replacement.start(argv, env, cwd, cpus, out_w, err_w)

    def _drop_server(self) -> None:
        if self._stop_server is not None:
            self._stop_server()  # closes the server, once
        self._server = self._stop_server = None

    def _watch(self, pid: int, fds: tuple[int, int], cap_bytes: int, timeout_s: float) -> _Watch:
        """A watch on the watch thread (started on first use), for a run spawned without the server."""
        self._pgid = pid
        if self._watcher is None:
            self._watcher = _Watcher()
            self._watcher.start()
            self._stop_watcher = weakref.finalize(self, self._watcher.jobs.put, None)
        watch = _Watch(fds, cap_bytes, timeout_s, pid, self._watcher.wake)
        self._watcher.jobs.put(watch)
        return watch

    def _wait_watch(self, watch: _Watch) -> None:
        """Wait for the watch to close the pipes (within ``GRACE_S``); should it not, the next run gets a new thread."""
        if not watch.finished.wait(timeout=GRACE_S + 5):
            self._drop_watcher()

    def _finished(self, watch: _Watch, status: int, r: Report) -> Execution:
        watch.reaped()
        self._pgid = None
        self._wait_watch(watch)
        return _execution(watch, status, r)

    def _direct(self, argv, env, cwd, timeout_s, cap_bytes, cpus, pipes) -> Execution:
        """No server (no C compiler): posix_spawn from perfab itself, max RSS only when above perfab's own."""
        out_r, out_w, err_r, err_w = pipes
        own_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        try:
            pid = _spawn(argv, env, cwd, out_w, err_w, cpus)
        except BaseException as e:
            os.close(out_r)
            os.close(err_r)
            if isinstance(e, OSError):
                return _not_started(argv, e.strerror or str(e))
            if isinstance(e, ValueError):
                return _not_started(argv, unusable_string(argv, env, cwd) or str(e))
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        watch = self._watch(pid, (out_r, err_r), cap_bytes, timeout_s)
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - started
        _killpg(pid, signal.SIGKILL)  # leftovers would disturb the next run and hold the pipes
        # Linux folds the spawning process's RSS high-water mark into the child's maxrss,
        # so a peak at or below perfab's own says nothing.
        rss = ru.ru_maxrss if ru.ru_maxrss > own_rss_kb else None
        report = Report(wall, ru.ru_utime, ru.ru_stime, rss, ru.ru_nvcsw, ru.ru_nivcsw)
        return self._finished(watch, status, report)


def _execution(watch: _Watch, status: int, r: Report) -> Execution:
    """The execution a finished watch and the wait status and rusage of its run describe."""
    out, err = watch.fds
    return Execution(status, r.wall_s, r.user_s, r.sys_s, r.max_rss_kb, r.nvcsw, r.nivcsw, watch.expired,
                     bytes(watch.kept[out]), bytes(watch.kept[err]), watch.total[out], watch.total[err],
                     stderr_tail=watch.tail[err])


def _not_started(argv: list[str], why: str) -> Execution:
    what = repr(argv[0]) if argv else "an empty command"
    return Execution(None, 0.0, 0.0, 0.0, 0, 0, 0, False, b"", b"", 0, 0, error=f"cannot execute {what}: {why}")


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


def _spawn(argv: list[str], env: dict[str, str], cwd: str | None, out_w: int, err_w: int,
           cpus: set[int] | None) -> int:
    """posix_spawn the command in a new session; stdin from /dev/null.

    posix_spawn (vfork-style) costs a fraction of fork() from a large Python
    process.  The child inherits this thread's CPU affinity and the
    process's working directory, so both are set around the call and
    restored.  The program is looked up in ``env``'s PATH, as the server does.
    """
    previous = os.sched_getaffinity(0) if cpus else None
    here = os.getcwd() if cwd else None
    program = argv[0]
    if os.sep not in program:
        program = shutil.which(program, path=env.get("PATH", os.defpath)) or program
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        if cwd:
            os.chdir(cwd)
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
        return os.posix_spawnp(program, argv, env, file_actions=actions, setsid=True, setsigmask=(),
                               setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    finally:
        if here is not None:
            os.chdir(here)
        if previous is not None:
            os.sched_setaffinity(0, previous)


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
