"""Other work on the machine while the runs ran, from ``/proc/stat``.

The load average only says how long the run queue was at one moment.
What matters for a measurement is how much of the CPUs' time went to work
that was not the experiment while it ran.  Around every run the runner
reads the aggregate ``cpu`` line of ``/proc/stat`` (clock ticks of user,
nice, system, idle, iowait, irq, softirq and steal time, summed over the
CPUs) and perfab's own CPU time (``getrusage(RUSAGE_SELF)``).  Over the
run's window::

    capacity = the eight fields together: every CPU's time
    busy     = user + nice + system + irq + softirq
    ours     = perfab's own CPU time + the measured command's (wait4
               rusage: perf or valgrind included) + its service's
    other    = busy - ours
    steal    = steal: time the hypervisor gave these CPUs to someone else

Summed over the session, ``other / capacity`` is other work's share of the
machine and ``steal / capacity`` the hypervisor's.  ``/proc/stat`` charges
whole ticks (1/USER_HZ s) to whatever runs when the tick fires, so one short
run reads coarsely (and a window's ``other`` may come out a tick below
zero); over many runs the sampling is unbiased, and the sums are kept
unclipped for that reason.  Above ``OTHER_SHARE_LIMIT`` or
``STEAL_SHARE_LIMIT`` the report's SETUP warns.

The fork server reads both ends of each window itself, right before it
forks the workload and right after it reaps it, with the CPU time perfab
and the server used in between (``CpuWindow``, carried by the run's
reply); without the server perfab reads them around the spawn
(``WindowReader``).

The sums are stored in the session's environment snapshot under ``busy.*``
(added when the session ends; a resumed session adds to them).
"""

from __future__ import annotations

import os
import resource
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

OTHER_SHARE_LIMIT = 0.10  # other work above 10% of the CPUs' time during the runs: warn
STEAL_SHARE_LIMIT = 0.02  # steal above 2% of the CPUs' time: warn
KEYS = ("busy.other_cpu_s", "busy.steal_s", "busy.capacity_s", "busy.runs")  # in the environment snapshot
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuStat:
    """The aggregate ``cpu`` line of ``/proc/stat``, in seconds summed over the CPUs."""

    busy_s: float  # user + nice + system + irq + softirq
    steal_s: float  # time the hypervisor ran something else on these CPUs
    total_s: float  # user .. steal together: every CPU's time so far


def read_cpu_stat(root: Path = Path("/")) -> CpuStat | None:
    """The machine's CPU time counters now; None where ``/proc/stat`` is missing or unreadable."""
    try:
        with open(root / "proc" / "stat", "rb") as f:
            return parse_cpu_line(f.readline())
    except OSError:
        return None


def parse_cpu_line(first: bytes) -> CpuStat | None:
    """The aggregate ``cpu`` line of ``/proc/stat`` in seconds; None when it is not one."""
    fields = first.split()
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    try:
        return cpu_stat([int(x) for x in fields[1:9]])
    except ValueError:
        return None


def cpu_stat(ticks: Sequence[int]) -> CpuStat:
    """The line's first eight counters (user, nice, system, idle, iowait, irq, softirq, steal; clock ticks)."""
    user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
    busy = user + nice + system + irq + softirq
    return CpuStat(busy * _TICK_S, steal * _TICK_S, (busy + idle + iowait + steal) * _TICK_S)


@dataclass(frozen=True)
class CpuWindow:
    """The machine's CPU counters at both ends of one run, and the harness's own CPU time between them."""

    before: CpuStat  # right before the workload was started
    after: CpuStat  # right after it was reaped
    harness_s: float  # CPU time perfab (and its fork server) used between the two readings


class _StatFile:
    """``/proc/stat`` kept open: each reading is one pread(2) of its first line, not an open, read and close
    (the runner reads it twice per run)."""

    def __init__(self, root: Path):
        self.path = root / "proc" / "stat"
        self.fd: int | None = None
        self._closer: weakref.finalize | None = None

    def read(self) -> CpuStat | None:
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                self._closer = weakref.finalize(self, os.close, self.fd)
            head = os.pread(self.fd, 256, 0)
        except OSError:
            return read_cpu_stat(self.path.parent.parent)
        return parse_cpu_line(head.split(b"\n", 1)[0])


def own_cpu_s() -> float:
    """perfab's own user and system time so far (this process, not its children)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Busy:
    """Other work's CPU time over the measured runs' windows, summed."""

    other_cpu_s: float  # CPU time of work that was neither perfab, its runs nor their services
    steal_s: float  # CPU time the hypervisor gave away
    capacity_s: float  # every CPU's time over the windows
    runs: int  # windows summed

    def add(self, other: "Busy") -> "Busy":
        return Busy(self.other_cpu_s + other.other_cpu_s, self.steal_s + other.steal_s,
                    self.capacity_s + other.capacity_s, self.runs + other.runs)

    def other_share(self) -> float:
        """Other work's share of the CPUs' time, 0..1 (a sum a few ticks below zero reads 0)."""
        return max(0.0, self.other_cpu_s / self.capacity_s) if self.capacity_s > 0 else 0.0

    def steal_share(self) -> float:
        """The hypervisor's share of the CPUs' time, 0..1."""
        return max(0.0, self.steal_s / self.capacity_s) if self.capacity_s > 0 else 0.0

    def to_env(self) -> dict[str, str]:
        values = (self.other_cpu_s, self.steal_s, self.capacity_s, self.runs)
        return {k: repr(v) for k, v in zip(KEYS, values)}

    @classmethod
    def from_env(cls, env: dict[str, str]) -> "Busy | None":
        """The sums stored in a session's environment; None for a session without them."""
        try:
            other, steal, capacity = (float(env[k]) for k in KEYS[:3])
            return cls(other, steal, capacity, int(env[KEYS[3]]))
        except (KeyError, ValueError):
            return None

    def describe(self) -> str:
        """One line for SETUP."""
        return (f"Other work: {_pct(self.other_share())} of the CPUs' time during the runs, steal "
                f"{_pct(self.steal_share())} (/proc/stat over {self.runs} runs; warn above "
                f"{_pct(OTHER_SHARE_LIMIT)} and {_pct(STEAL_SHARE_LIMIT)})")

    def warning(self) -> str | None:
        """A warning when other work or steal exceeded its limit, else None."""
        parts = []
        if self.other_share() > OTHER_SHARE_LIMIT:
            parts.append(f"other work took {_pct(self.other_share())} of the CPUs' time during the runs "
                         f"(limit {_pct(OTHER_SHARE_LIMIT)})")
        if self.steal_share() > STEAL_SHARE_LIMIT:
            parts.append(f"the hypervisor stole {_pct(self.steal_share())} of it (limit {_pct(STEAL_SHARE_LIMIT)})")
        if not parts:
            return None
        return f"busy machine: {'; '.join(parts)}; spreads are wider and small effects hide: stop the other work " \
               "and run again"


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%"


class WindowReader:
    """Reads a window from perfab itself: ``start()`` before a run, ``stop(token)`` after it (None unreadable)."""

    def __init__(self, root: Path = Path("/")):
        self._stat = _StatFile(root)

    def start(self) -> tuple[CpuStat, float] | None:
        stat = self._stat.read()
        return None if stat is None else (stat, own_cpu_s())

    def stop(self, token: tuple[CpuStat, float] | None) -> CpuWindow | None:
        after = self._stat.read() if token is not None else None
        return None if after is None else CpuWindow(token[0], after, own_cpu_s() - token[1])


class BusyMeter:
    """Sums other work over run windows: ``add(window, run_cpu_s)`` per run (or ``start()`` before a run and
    ``stop(run_cpu_s)`` after it, reading the window here)."""

    def __init__(self, root: Path = Path("/")):
        self._sums = [0.0, 0.0, 0.0, 0]  # other CPU, steal, capacity (s), windows: ``total``, added to per run
        self._reader = WindowReader(root)
        self._at: tuple[CpuStat, float] | None = None

    @property
    def total(self) -> Busy:
        """The sums so far."""
        return Busy(*self._sums)

    def start(self) -> None:
        self._at = self._reader.start()

    def stop(self, run_cpu_s: float | None) -> None:
        """End the window; ``run_cpu_s`` is the run's (and its service's) CPU time, None when unknown."""
        at, self._at = self._at, None
        self.add(self._reader.stop(at), run_cpu_s)

    def add(self, window: CpuWindow | None, run_cpu_s: float | None) -> None:
        """Add one run's window (None: unread); ``run_cpu_s`` is the run's and its service's CPU time."""
        if window is None or run_cpu_s is None:
            return
        before, after, sums = window.before, window.after, self._sums
        sums[0] += after.busy_s - before.busy_s - (window.harness_s + run_cpu_s)
        sums[1] += after.steal_s - before.steal_s
        sums[2] += after.total_s - before.total_s
        sums[3] += 1
