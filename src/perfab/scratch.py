"""Scratch folders that outlive no process: each names its owner, and the next perfab removes what a killed one left.

A folder is ``$TMPDIR/perfab-<kind>-<pid>-<start>-<random>``, ``pid`` and
``start`` (clock ticks after boot, field 22 of ``/proc/<pid>/stat``) naming
the process that made it: a pid alone may be reused.  ``owned`` removes
its folder when the block ends, however it ends (an exception, SIGTERM
turned into ``SystemExit``).  A process killed outright (SIGKILL: the
runner's timeout, a second SIGINT, or perfab itself killed) leaves its
folder behind; ``sweep`` removes every folder whose owner is gone, after
killing the process its ``pid`` file names (QEMU, started in its own
session) when that process is still running and its command line names
the folder.  The kinds are ``boot`` (one guest's console, result channel
and plugin output), ``kvm`` (the KVM probe) and ``run`` (a session's run
scratch).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

KINDS = ("boot", "kvm", "run")
PID_FILE = "pid"  # the pid of a process the folder's owner started in its own session (QEMU)
_NAME = re.compile(r"^perfab-(boot|kvm|run)-(\d+)-(\d+)-")


def start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks after boot, None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None


@contextmanager
def owned(kind: str) -> Iterator[Path]:
    """A fresh folder of ``kind`` owned by this process, removed when the block ends."""
    path = Path(make(kind))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make(kind: str) -> str:
    """A fresh folder of ``kind`` owned by this process; the caller removes it."""
    pid = os.getpid()
    return tempfile.mkdtemp(prefix=f"perfab-{kind}-{pid}-{start_ticks(pid) or 0}-")


def record_child(folder: Path, pid: int) -> None:
    """Note the process started for ``folder`` (in its own session), so a sweep can stop it if the owner dies."""
    try:
        (folder / PID_FILE).write_text(f"{pid}\n")
    except OSError:
        pass


def sweep(root: str | None = None) -> list[Path]:
    """Remove the folders whose owner is gone, after stopping the child each names; the folders removed."""
    removed: list[Path] = []
    if start_ticks(os.getpid()) is None:
        return removed  # no /proc to tell a live owner from a dead one: remove nothing
    base = Path(root or tempfile.gettempdir())
    try:
        candidates = sorted(base.glob("perfab-*-*-*-*"))
    except OSError:
        return removed
    for folder in candidates:
        m = _NAME.match(folder.name)
        if m is None or not folder.is_dir() or start_ticks(int(m.group(2))) == int(m.group(3)):
            continue
        _stop_child(folder)
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _stop_child(folder: Path) -> None:
    """SIGKILL the process ``folder``'s pid file names, if it still runs with the folder on its command line."""
    try:
        pid = int((folder / PID_FILE).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if str(folder).encode() not in cmdline:
        return  # the pid was reused by another process
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    for _ in range(100):  # its files are closed once it is gone
        if start_ticks(pid) is None or _zombie(pid):
            return
        time.sleep(0.01)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True
