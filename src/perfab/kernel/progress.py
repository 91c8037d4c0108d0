"""What a kernel build is doing, said while it runs.

``make`` prints one line per compiled file (``  CC      kernel/fork.o``).
``MakeProgress`` reads those lines as they come, keeps the build log, and
every ``interval_s`` says how many files are compiled out of the expected
count, the elapsed time and an estimate of what is left: every 15 s on a
terminal, once a minute otherwise (a CI log).  The expected count is the
count of the last build of the same base (kept in the cache's meta), so a
first build says "files compiled" without a total.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

STEP = re.compile(rb"^  (CC|AS|CC \[M\])\s+\S")  # kbuild's quiet output: one line per compiled file
TERMINAL_INTERVAL_S = 15.0
LOG_INTERVAL_S = 60.0


def default_interval_s() -> float:
    """Every 15 s on a terminal, once a minute in a log."""
    return TERMINAL_INTERVAL_S if sys.stderr.isatty() else LOG_INTERVAL_S


@dataclass
class MakeProgress:
    """Counts compiled files in make's output and says where a build stands (see the module docstring)."""

    label: str  # how the build is named in each line, e.g. "kernel 3f2a91c0d4e1"
    say: Callable[[str], None]  # where the lines go
    expected: int | None = None  # files the build is expected to compile, from an earlier build; None: unknown
    interval_s: float = field(default_factory=default_interval_s)  # seconds between lines
    compiled: int = 0  # files compiled so far
    started: float = field(default_factory=time.monotonic)  # when make started
    _last: float = field(default_factory=time.monotonic)  # when the last line was said

    def feed(self, line: bytes) -> None:
        """One line of make's output; says a progress line when one is due."""
        if STEP.match(line):
            self.compiled += 1
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self._last = now
            self.say(self.status(now))

    def status(self, now: float | None = None) -> str:
        """``kernel K: 512 of ~1,480 files compiled, 3m10s, about 6m left``."""
        elapsed = (now or time.monotonic()) - self.started
        if not self.expected:
            return f"{self.label}: {self.compiled:,} files compiled, {_clock(elapsed)}"
        done = min(self.compiled, self.expected)
        left = elapsed / done * (self.expected - done) if done else None
        estimate = f", about {_clock(left)} left" if left is not None and done < self.expected else ""
        return f"{self.label}: {self.compiled:,} of ~{self.expected:,} files compiled, {_clock(elapsed)}{estimate}"


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
