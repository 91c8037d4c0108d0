"""Screening workloads for i-cache sensitivity (``perfab screen``), as in seed 000.

Seed 000 picks benchmarks that can show a kernel text-size cost: a high
``tma_frontend_bound`` fraction from ``perf stat -M TopdownL1`` together with
non-trivial time in the kernel (syscall-heavy).  ``screen_command`` measures
both for one command line: first ``task-clock, context-switches, user_time,
system_time, duration_time`` (software events, work everywhere), then
``-M TopdownL1`` (needs a PMU with TopdownL1 metrics).  ``rank`` orders the
results.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from perfab.errors import ToolError, UsageError
from perfab.run.backends.perfparse import PerfStatOutput, parse_csv, topdown_rows

_SW_EVENTS = "task-clock,context-switches,user_time,system_time,duration_time"
NO_TOPDOWN = "TopdownL1 not supported on this CPU"


@dataclass(frozen=True)
class ScreenResult:
    """How kernel-heavy and frontend-bound one command is."""

    argv: tuple[str, ...]  # the command screened
    kernel_share: float | None  # system_time / (user_time + system_time), 0..1; None when both are 0
    ctx_switches_per_s: float | None  # context switches per second of wall time (duration_time)
    topdown: dict[str, float] | None  # tma_* level-1 fractions of slots (0..1); None when unsupported
    note: str  # "" or why a field is missing


def screen_command(argv: list[str], runs: int = 1, perf: str = "perf") -> ScreenResult:
    """Run ``argv`` under ``perf stat`` twice (software events, then -M TopdownL1)."""
    if not argv:
        raise UsageError("screen: no command given; pass the workload after --")
    if runs < 1:
        raise UsageError(f"screen: runs = {runs}; it must be at least 1")
    if shutil.which(perf) is None:
        raise ToolError(f"screen: {perf!r} not found; install perf (Debian: apt-get install linux-perf)")
    sw = _perf_stat(perf, ["-r", str(runs), "-e", _SW_EVENTS], argv)
    values = {r.event: (r.value if r.status == "ok" else 0.0) for r in sw.counters()}
    user, system = values.get("user_time") or 0.0, values.get("system_time") or 0.0
    wall_ns = values.get("duration_time") or 0.0
    switches = values.get("context-switches")
    topdown = topdown_rows(_perf_stat(perf, ["-r", str(runs), "-M", "TopdownL1"], argv))
    return ScreenResult(
        argv=tuple(argv),
        kernel_share=system / (user + system) if user + system > 0 else None,
        ctx_switches_per_s=switches / (wall_ns / 1e9) if switches is not None and wall_ns > 0 else None,
        topdown=topdown,
        note="" if topdown is not None else NO_TOPDOWN,
    )


def rank(results: list[ScreenResult]) -> list[ScreenResult]:
    """Most promising first: by tma_frontend_bound, then kernel share.

    Results with TopdownL1 rank before those without; among those without,
    kernel share alone orders them.  Missing values sort last.
    """

    def key(result: ScreenResult) -> tuple[int, float, float]:
        frontend = (result.topdown or {}).get("tma_frontend_bound")
        has_frontend = frontend is not None and frontend == frontend  # nan is missing
        share = result.kernel_share if result.kernel_share is not None else -1.0
        return (0 if has_frontend else 1, -(frontend if has_frontend else 0.0), -share)

    return sorted(results, key=key)


def _perf_stat(perf: str, options: list[str], argv: list[str]) -> PerfStatOutput:
    with tempfile.TemporaryDirectory(prefix="perfab-screen-") as tmp:
        out, err = Path(tmp) / "perf.stat", Path(tmp) / "stderr"
        with open(err, "w") as stderr:
            done = subprocess.run([perf, "stat", "-x", ";", "-o", str(out), *options, "--", *argv],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                  env={**os.environ, "LC_ALL": "C"})  # fmt: skip
        text = out.read_text() if out.exists() else ""
        parsed = parse_csv(text, ";")
        if done.returncode != 0 or not parsed.counters():
            tail = err.read_text(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise ToolError(f"screen: perf stat {' '.join(options)} -- {' '.join(argv)} exited"
                            f" {done.returncode}: {tail[0]}; check that the command runs on its own")  # fmt: skip
    return parsed
