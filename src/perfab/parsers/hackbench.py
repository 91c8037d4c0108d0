"""hackbench (rt-tests, or the kernel's original): the ``Time: <seconds>`` line."""

from __future__ import annotations

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParsedMetric, combined, need

OPTIONS: frozenset[str] = frozenset()

TOOL = "hackbench"

METRICS = (M("time_s", "s", False, "'Time:': wall time for all groups to pass their messages"),)


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """``time_s``, lower is better; ParseError without a 'Time:' line."""
    out = Collector(TOOL, METRICS)
    out.add("time_s", need(rf"^Time:\s+({NUM})\s*$", combined(stdout, stderr), TOOL, "'Time: <seconds>' line")[1])
    return out.metrics
