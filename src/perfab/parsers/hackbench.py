"""hackbench (rt-tests, or the kernel's original): the ``Time: <seconds>`` line."""

from __future__ import annotations

from perfab.parsers._base import NUM, ParsedMetric, combined, metric, need

OPTIONS: frozenset[str] = frozenset()


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """``time_s``, lower is better; ParseError without a 'Time:' line."""
    found = need(rf"^Time:\s+({NUM})\s*$", combined(stdout, stderr), "hackbench", "'Time: <seconds>' line")
    return {"time_s": metric(found[1], "s", False)}
