"""A process tree: a command and everything it forks, started, measured and stopped as one.

``ProcessTree`` starts a command under ``perfab-exec --contain`` (see
``perfab-exec.c``), a child subreaper: a process that leaves the command's
session (``setsid``, a daemon's double fork) is reparented to the helper when
its parent dies, never to init, so it stays below the tree's root and can be
found and killed.  ``kill`` stops the whole tree: SIGTERM to every process in
it, SIGKILL to all after a grace.  ``alive`` tells whether the command itself
still runs (the helper kills the rest and exits as the command did when it
ends).  ``cpu_times`` sums the user and system time of every process in the
tree, with the time of the children each one reaped (``/proc/PID/stat``
utime, stime, cutime, cstime; see proc(5)).

Without the helper (no C compiler) the command leads its own session and
only the processes still below it can be found; those that left and were
orphaned are out of reach.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO, NamedTuple

from perfab.run.trampoline import helper_path

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
# /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN) spares a scan of all of /proc.
_CHILDREN_FILES = Path(f"/proc/self/task/{threading.get_native_id()}/children").exists()


class CpuTimes(NamedTuple):
    """CPU time consumed by a process tree."""

    user_s: float  # user CPU seconds
    sys_s: float  # system CPU seconds


class ProcessTree:
    """A running command and all it forks; see the module docstring."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str | None, output: int | IO[bytes]):
        """Start ``argv`` with stdin from /dev/null and stdout and stderr to ``output``; OSError if it cannot."""
        helper = helper_path()
        self.contained = helper is not None  # under perfab-exec --contain
        command = [helper, "--contain", "--", *argv] if helper else list(argv)
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=env,
                                     cwd=cwd, start_new_session=True)
        self.pid = self.proc.pid  # the root: the helper, or the command itself without one
        self._last = CpuTimes(0.0, 0.0)

    def alive(self) -> bool:
        """Whether the command still runs."""
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """The command's exit status, or minus its signal; None while it runs."""
        return self.proc.poll()

    def pids(self) -> list[int]:
        """The root and every process below it, parents before children."""
        return [self.pid, *descendants(self.pid)] if self.alive() else []

    def cpu_times(self) -> CpuTimes:
        """User and system time of the whole tree so far; the last reading once the tree is gone.

        Never less than the previous reading: a process reaped while the tree
        is read counts in neither itself nor its parent for that reading.
        """
        pids = self.pids()
        if pids:
            now = cpu_times(pids)
            self._last = CpuTimes(max(now.user_s, self._last.user_s), max(now.sys_s, self._last.sys_s))
        return self._last

    def run_ns(self) -> int:
        """Nanoseconds on a CPU of the tree's live threads so far (see ``run_ns``)."""
        return run_ns(self.pids())

    def io_counts(self) -> dict[str, int]:
        """Read and write system calls of the tree's live processes so far (see ``io_counts``)."""
        return io_counts(self.pids())

    def kill(self, grace_s: float = 5.0) -> None:
        """Stop every process in the tree: SIGTERM, then SIGKILL after ``grace_s``; reaps the root."""
        if self.contained:
            # The helper passes SIGTERM to every process below it, kills them all at SIGUSR1,
            # and exits once the command is gone.
            if self._signal([self.pid], signal.SIGTERM, grace_s) or self._signal([self.pid], signal.SIGUSR1, grace_s):
                return
            _kill_all(self.pids(), signal.SIGKILL)  # the helper did not answer
        else:
            tree = self.pids()  # known by pid: those the command's exit orphans are out of reach later
            self._signal(tree, signal.SIGTERM, grace_s, group=True)
            _kill_all(tree[1:] + self.pids()[:1], signal.SIGKILL)  # the root only while it is not reaped
            _kill_group(self.pid, signal.SIGKILL)
        self.proc.wait()

    def _signal(self, pids: list[int], sig: int, wait_s: float, group: bool = False) -> bool:
        """Send ``sig`` to ``pids`` (and the root's process group); whether the root is gone within ``wait_s``."""
        if self.alive():
            _kill_all(pids, sig)
            if group:
                _kill_group(self.pid, sig)
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return False
        return True


def descendants(root: int) -> list[int]:
    """Every process below ``root``, parents before children (read from /proc)."""
    children = _children_of if _CHILDREN_FILES else _parent_map_children()
    found: list[int] = []
    todo = [root]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


def cpu_times(pids: list[int]) -> CpuTimes:
    """User and system time of ``pids``, each with its reaped children's; processes gone count nothing."""
    user = system = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:  # after the command name: state is field 3, utime..cstime 14..17
            user += int(fields[11]) + int(fields[13])
            system += int(fields[12]) + int(fields[14])
    return CpuTimes(user * _TICK_S, system * _TICK_S)


def run_ns(pids: list[int]) -> int:
    """Nanoseconds on a CPU of every thread of ``pids`` so far (``/proc/PID/task/TID/schedstat``).

    Scheduler accounting, exact to the nanosecond, where ``/proc/PID/stat``
    counts clock ticks: what a server spends per request (tens of
    microseconds) is told apart only with it.  Threads and processes that
    have exited count nothing; 0 when the kernel has no schedstat.
    """
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            continue
        for tid in tids:
            try:
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
                pass
    return total


IO_FIELDS = ("syscr", "syscw")  # read and write system calls, from /proc/PID/io


def io_counts(pids: list[int]) -> dict[str, int]:
    """Read and write system calls made so far by the live processes ``pids`` (``/proc/PID/io``).

    {} when a live process's counts cannot be read (another user's process, a kernel without task I/O
    accounting): a total missing one of them is no reading, and 0 would be taken for one."""
    total = dict.fromkeys(IO_FIELDS, 0)
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/io").read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited since the tree was listed: it counts nothing, as in ``cpu_times``
        except OSError:
            return {}
        for line in lines:
            key, _, value = line.partition(":")
            if key in total:
                total[key] += int(value)
    return total


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses


def _children_of(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return kids
    for tid in tasks:
        try:
            kids += map(int, Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            pass
    return kids


def _parent_map_children():
    """A ``children(pid)`` function over one scan of /proc (kernels without children files)."""
    by_parent: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat(int(name))) is not None:
            by_parent.setdefault(int(fields[1]), []).append(int(name))
    return lambda pid: by_parent.get(pid, [])


def _kill_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
