"""Running a command without the fork server (no C compiler): posix_spawn from perfab itself.

The command is spawned in a new session with posix_spawn and reaped with
``os.wait4``; only its process group can be killed at the timeout, and max
RSS is reported only when it is above perfab's own (Linux folds the
spawning process's RSS high-water mark into the child's).  One long-lived
watch thread reads the pipes (``_Watch``), and perfab reads the machine's
CPU counters around the run itself (``perfab.machine.busy.WindowReader``).
"""

from __future__ import annotations

import os
import queue
import resource
import selectors
import shutil
import signal
import threading
import time
import weakref

from perfab.machine.busy import WindowReader
from perfab.run.execution import Execution, killpg as _killpg, not_started
from perfab.run.trampoline import GRACE_S, TAIL_BYTES, Report, unusable_string


class _Watch:
    """One directly spawned run's output and deadline: drains stdout and stderr, blocked in select(2).

    Keeps the first ``cap`` bytes of each stream and counts the rest.  At
    the deadline it kills the process group.  ``reaped()`` (the child is
    reaped) wakes it through the watcher's eventfd ``wake``; it reads what
    is left for at most ``GRACE_S``, then closes the pipes even if a process
    that escaped still holds their other end.
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


class DirectSpawner:
    """Runs commands spawned straight from perfab; see the module docstring.  ``close()`` ends its thread."""

    def __init__(self) -> None:
        self._pgid: int | None = None
        self._watcher: _Watcher | None = None
        self._stop_watcher: weakref.finalize | None = None  # also run when the spawner is collected
        self._window = WindowReader()  # the machine's CPU counters around each run

    def close(self) -> None:
        if self._stop_watcher is not None:
            self._stop_watcher()  # the thread ends after its current watch
        self._watcher = self._stop_watcher = None

    def interrupt(self) -> None:
        pgid = self._pgid
        if pgid is not None:
            _killpg(pgid, signal.SIGKILL)

    def execute(self, argv, env, cwd, timeout_s, cap_bytes, cpus) -> Execution:
        """posix_spawn from perfab itself, max RSS only when above perfab's own."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        own_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        window = self._window.start()
        started = time.perf_counter()
        try:
            pid = _spawn(argv, env, cwd, out_w, err_w, cpus)
        except BaseException as e:
            os.close(out_r)
            os.close(err_r)
            if isinstance(e, OSError):
                return not_started(argv, e.strerror or str(e))
            if isinstance(e, ValueError):
                return not_started(argv, unusable_string(argv, env, cwd) or str(e))
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        watch = self._watch(pid, (out_r, err_r), cap_bytes, timeout_s)
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - started
        _killpg(pid, signal.SIGKILL)  # leftovers would disturb the next run and hold the pipes
        rss = ru.ru_maxrss if ru.ru_maxrss > own_rss_kb else None  # at or below perfab's own it says nothing
        report = Report(wall, ru.ru_utime, ru.ru_stime, rss, ru.ru_nvcsw, ru.ru_nivcsw)
        cpus_window = self._window.stop(window)
        watch.reaped()
        self._pgid = None
        self._wait_watch(watch)
        out, err = watch.fds
        return Execution(status, report.wall_s, report.user_s, report.sys_s, report.max_rss_kb, report.nvcsw,
                         report.nivcsw, watch.expired, bytes(watch.kept[out]), bytes(watch.kept[err]),
                         watch.total[out], watch.total[err], stderr_tail=watch.tail[err], window=cpus_window)

    def _watch(self, pid: int, fds: tuple[int, int], cap_bytes: int, timeout_s: float) -> _Watch:
        """A watch on the watch thread (started on first use)."""
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
            self.close()


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
