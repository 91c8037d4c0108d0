"""Versions of the tools a measurement depends on, and the virtualisation.

Each tool runs once with ``--version``; ``systemd-detect-virt`` runs twice,
for the hypervisor (``--vm``: "kvm", "none") and the container
(``--container``: "docker", "none").  The value is the first non-empty line it prints, ``absent``
when it is not on ``PATH``, ``unknown`` when it fails silently or does not
answer within the deadline.  All tools run at once so the whole set costs
about as much as the slowest one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from perfab.machine.sysfs import ABSENT, UNKNOWN

_FLOOR_S = 0.05  # time still granted to each tool once the deadline has passed
DEADLINE_S = 2.0  # wall-clock budget for all the tools together (they take ~0.2 s; slack for load)

# snapshot key -> argv
COMMANDS: dict[str, tuple[str, ...]] = {
    "tool.perf": ("perf", "--version"),
    "tool.valgrind": ("valgrind", "--version"),
    "tool.gcc": ("gcc", "--version"),
    "tool.clang": ("clang", "--version"),
    "tool.python": ("python3", "--version"),
    "virt.vm": ("systemd-detect-virt", "--vm"),
    "virt.container": ("systemd-detect-virt", "--container"),
}


def versions(
    commands: dict[str, tuple[str, ...]] = COMMANDS, deadline_s: float = DEADLINE_S
) -> dict[str, str]:
    """Key -> first line of each command's output; see the module docstring."""
    env = dict(os.environ, LC_ALL="C")
    started: dict[str, subprocess.Popen[bytes]] = {}
    result: dict[str, str] = {}
    for key, argv in commands.items():
        exe = shutil.which(argv[0])
        if exe is None:
            result[key] = ABSENT
            continue
        try:
            started[key] = subprocess.Popen(
                [exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, env=env,
            )
        except OSError:
            result[key] = UNKNOWN
    end = time.monotonic() + deadline_s
    for key, proc in started.items():
        # a floor, so a tool that finished while another used up the budget still counts
        result[key] = _first_line(proc, max(_FLOOR_S, end - time.monotonic()))
    return {key: result[key] for key in commands}


def _first_line(proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    """The first non-empty output line of ``proc``; kills it past the timeout."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return UNKNOWN
    for line in out.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()
    return UNKNOWN
