"""Who runs a session: one runner at a time claims it.

A claim names the process (host, boot id, pid and the process's start time
in clock ticks since boot, so a recycled pid is not mistaken for the
holder).  A claim made on this host in this boot is checked through
``/proc``; one from another host cannot be checked and stands until its
runner releases it or a user takes it over explicitly.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Owner:
    """The runner holding a session."""

    host: str  # hostname of the runner's machine
    boot_id: str  # /proc/sys/kernel/random/boot_id of that machine ("" when unreadable)
    pid: int  # the runner's process id
    start_ticks: int  # the process's start time, clock ticks after boot (/proc/PID/stat field 22)
    since: float  # unix time of the claim

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str | None) -> "Owner | None":
        if not text:
            return None
        try:
            d = json.loads(text)
            return Owner(str(d["host"]), str(d["boot_id"]), int(d["pid"]), int(d["start_ticks"]), float(d["since"]))
        except (ValueError, KeyError, TypeError):
            return None  # an unreadable claim holds nothing

    def alive(self) -> bool | None:
        """True or False when it can be told from here; None for a claim from another machine or boot."""
        if self.host != os.uname().nodename or self.boot_id != _boot_id():
            return None
        return _start_ticks(self.pid) == self.start_ticks

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on {self.host} (since {when})"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (after the parenthesised command name, which may hold spaces)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    try:
        return int(text[text.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None
