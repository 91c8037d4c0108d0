"""Counters for a service, not only its client: ``perf stat`` attached to the server over each run.

With the perf backend and ``[workload.service] counters = "pids"``, a
second ``perf stat`` attaches to every process of the server (``-p``,
all their threads) when a run starts and is stopped with SIGINT when it
ends; ``counters = "cpus"`` counts the CPUs in ``service.cpus`` instead,
everything that ran on them (``-a -C``, as seed 000 counted the kernel
side of a benchmark).  Each run carries the same counter group for client
and server, so both stay within the schedule; the server's counts are
stored as ``service.<event>`` and judged like the client's (100% running
or excluded with the reason).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from perfab.run.backends.perfparse import PerfStatParseError, exclusion, parse_json

OUTPUT = "service.stat"


def _perf_fds(pid: int) -> int:
    """The perf_event file descriptors process ``pid`` holds."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    count = 0
    for name in names:
        try:
            count += os.readlink(f"/proc/{pid}/fd/{name}") == "anon_inode:[perf_event]"
        except OSError:
            continue
    return count


class ServiceCounter:
    """One ``perf stat`` attached to a service for the length of one run."""

    def __init__(self, perf: str, events: tuple[str, ...], scratch: Path, pids: list[int] | None = None,
                 cpus: str | None = None):
        self.events = events
        self.output = Path(scratch) / OUTPUT
        target = ["-a", "-C", cpus] if cpus else ["-p", ",".join(map(str, pids or []))]
        self.argv = [perf, "stat", "-j", "-o", str(self.output), "-e", ",".join(events), *target]
        self.proc: subprocess.Popen | None = None

    def start(self) -> str | None:
        """Attach; the reason when it cannot."""
        if not self.events:
            return None
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, env={**os.environ, "LC_ALL": "C"})
        except OSError as e:
            return f"perf stat for the service could not start ({e.strerror})"
        self._attached()
        return None

    def _attached(self, deadline_s: float = 5.0) -> None:
        """Wait until perf has opened its counters (its perf_event descriptors stop growing in number), so
        the run does not start before the server is counted: on a busy machine perf takes a while."""
        start, seen, steady = time.monotonic(), -1, 0
        while time.monotonic() - start < deadline_s and self.proc.poll() is None:
            now = _perf_fds(self.proc.pid)
            steady = steady + 1 if now == seen and now >= len(self.events) else 0
            if steady >= 3:
                return
            seen = now
            time.sleep(0.01)

    def stop(self) -> tuple[dict[str, float], dict[str, str]]:
        """Stop counting: (``service.<event>`` metrics, exclusions with reasons)."""
        if self.proc is None:
            return {}, {}
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        names = [f"service.{e}" for e in self.events]
        try:
            rows = parse_json(self.output.read_text()).counters()
        except (OSError, PerfStatParseError) as e:
            why = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or [str(e)]
            return {}, {n: f"perf stat on the service wrote no counts ({why[0][:120]})" for n in names}
        if len(rows) != len(self.events):
            return {}, {n: f"perf stat on the service printed {len(rows)} rows for {len(self.events)} events"
                        for n in names}
        metrics, excluded = {}, {}
        for name, row in zip(names, rows):
            reason = exclusion(row)
            if reason:
                excluded[name] = reason
            else:
                metrics[name] = float(row.value)
        return metrics, excluded
