"""A fake ``perf stat -j`` for the FakeExecutor: seeded counts in real perf 6.1 output.

This VM has no hardware PMU, so ``cycles`` and friends read ``<not
supported>`` here.  ``FakePerf`` stands in for perf: given the argv the perf
backend built (``perf stat -j -o <path> -e <events> -- <workload...>``) it
writes into ``<path>`` one JSON object per requested event, with the key
layout of the real perf 6.1 output recorded on this VM
(``tests/data/perf/vm_group_u.json``: the ``# started on`` line, a blank
line, then ``counter-value`` / ``unit`` / ``event`` / ``event-runtime`` /
``pcnt-running`` / ``metric-value`` / ``metric-unit``), and prints the
workload's own output on stdout (``ops/s: N``, for the ``keyvalue`` parser).

Like perf 6.1, it prints generic cache events without their privilege
filter (``L1-icache-load-misses`` for ``L1-icache-load-misses:u``) and
keeps the filter on other hardware events (``cycles:u``).

Values: for each side a ``Level(mean, noise)`` per event; one run draws
``mean * (1 + gauss(0, noise))`` from one seeded ``random.Random``, so a
whole experiment is reproducible.  ``written`` keeps what every call wrote,
so tests can compare the stored runs with the raw counts.  ``faults`` turns
chosen calls (by index) into multiplexed, ``<not counted>`` or
exit-255 runs.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from perfab.run.executor import FakeOutcome

HEADER = "# started on Sun Nov 22 04:48:10 2026\n\n"  # as perf 6.1 starts its -o file (vm_group_u.json)
_CACHE_EVENT = re.compile(r"^(L1-[di]cache|LLC|dTLB|iTLB|node|branch-load)")  # printed without :u/:k
_TOOL_TIMES = ("user_time", "system_time")


@dataclass(frozen=True)
class Level:
    """The per-run distribution of one reading on one side."""

    mean: float  # mean over runs, in the reading's unit (a count, s, ops/s)
    noise: float = 0.0  # relative standard deviation per run (0.003 = 0.3%)


@dataclass(frozen=True)
class Fault:
    """What goes wrong in one call."""

    multiplexed: dict[str, float] = field(default_factory=dict)  # event -> pcnt-running (e.g. 67.00)
    not_counted: tuple[str, ...] = ()  # events printed as <not counted>
    group_unsupported: bool = False  # perf exits 255: "The cycles:u event is not supported."


@dataclass(frozen=True)
class Written:
    """What one fake perf call wrote."""

    side: str  # the variant, read from the workload path ./build/<side>/...
    events: tuple[str, ...]  # the -e list, in order
    counts: dict[str, float]  # event -> the count written (unscaled), for counted events
    wall_s: float  # reported elapsed time


class FakePerf:
    """``behaviour(argv, env)`` for ``FakeExecutor``; see the module docstring."""

    def __init__(self, levels: dict[str, dict[str, Level]], seed: int = 1, faults: dict[int, Fault] | None = None):
        self.levels = levels  # side -> event (or "wall_s", "ops/s") -> Level
        self.rng = random.Random(seed)
        self.faults = faults or {}
        self.written: list[Written] = []
        self.calls = 0

    def __call__(self, argv: list[str], env: dict[str, str]) -> FakeOutcome:
        index, self.calls = self.calls, self.calls + 1
        output, events, workload = _perf_argv(argv)
        side = workload[0].split("/")[2]
        fault = self.faults.get(index, Fault())
        if fault.group_unsupported:
            Path(output).write_text(HEADER)
            self.written.append(Written(side, events, {}, 0.0))
            return FakeOutcome(exit_code=255, stderr=b"Error:\nThe cycles:u event is not supported.\n")
        level = self.levels[side]
        wall_s = round(self._draw(level["wall_s"]), 6)
        counts = {e: float(round(self._draw(level[e]))) for e in events if e not in _TOOL_TIMES}
        counts.update(user_time=round(wall_s * 0.97 * 1e9), system_time=round(wall_s * 0.02 * 1e9))
        Path(output).write_text(HEADER + "".join(_row(e, counts, wall_s, fault) + "\n" for e in events))
        self.written.append(Written(side, events, {e: v for e, v in counts.items() if e not in fault.not_counted},
                                    wall_s))
        stdout = f"ops/s: {round(self._draw(level['ops/s']))}\n".encode() if "ops/s" in level else b""
        return FakeOutcome(wall_s=wall_s, user_s=round(wall_s * 0.97, 6), stdout=stdout)

    def _draw(self, level: Level) -> float:
        return level.mean * (1 + self.rng.gauss(0, level.noise)) if level.noise else level.mean


def _perf_argv(argv: list[str]) -> tuple[str, tuple[str, ...], list[str]]:
    """(-o path, -e events, workload argv) of ``perf stat -j -o P -e E -- cmd...``."""
    assert argv[:3] == ["perf", "stat", "-j"], argv
    cut = argv.index("--")
    opts = argv[3:cut]
    output = opts[opts.index("-o") + 1]
    events = tuple(opts[opts.index("-e") + 1].split(","))
    return output, events, argv[cut + 1:]


def _row(event: str, counts: dict[str, float], wall_s: float, fault: Fault) -> str:
    """One perf 6.1 ``-j`` line, keys in perf's order (see tests/data/perf/vm_group_u.json)."""
    enabled_ns = round(wall_s * 1e9)
    unit = "ns" if event in _TOOL_TIMES else ""
    shown = event.split(":")[0] if _CACHE_EVENT.match(event) else event
    pct = fault.multiplexed.get(event, 100.0)
    if event in fault.not_counted:
        value, runtime, metric, metric_unit = "<not counted>", 0, 0.0, ""
    else:
        value = f"{counts[event] * 100.0 / pct:.6f}"  # perf scales a multiplexed count up to the enabled time
        runtime = round(enabled_ns * pct / 100.0)
        metric, metric_unit = _metric(event, counts)
    return (f'{{"counter-value" : {json.dumps(value)}, "unit" : "{unit}", "event" : "{shown}", '
            f'"event-runtime" : {runtime}, "pcnt-running" : {pct:.2f}, "metric-value" : {metric:.6f}, '
            f'"metric-unit" : "{metric_unit}"}}')


def _metric(event: str, counts: dict[str, float]) -> tuple[float, str]:
    """perf's own metric column (rounded, never used by perfab): IPC on the instructions row."""
    if event.startswith("instructions") and counts.get(event.replace("instructions", "cycles", 1)):
        return counts[event] / counts[event.replace("instructions", "cycles", 1)], "insn per cycle"
    return 0.0, ""
