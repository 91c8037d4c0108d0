"""tools.versions(): absent tools, silent tools and tools that hang."""

from __future__ import annotations

import time

from perfab.machine import ABSENT, UNKNOWN
from perfab.machine.tools import versions


def test_tool_not_on_path_is_absent():
    assert versions({"tool.x": ("perfab-no-such-tool", "--version")}) == {"tool.x": ABSENT}


def test_hanging_tool_is_killed_at_the_deadline():
    start = time.perf_counter()
    got = versions({"tool.sleep": ("sleep", "30"), "tool.echo": ("echo", "v1.2")}, deadline_s=0.3)
    assert got == {"tool.sleep": UNKNOWN, "tool.echo": "v1.2"}
    assert time.perf_counter() - start < 2.0


def test_silent_tool_is_unknown_and_stderr_counts():
    got = versions({"tool.true": ("true",), "tool.err": ("sh", "-c", "echo 'x 1.0' >&2; exit 3")})
    assert got == {"tool.true": UNKNOWN, "tool.err": "x 1.0"}
