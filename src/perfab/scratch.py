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

A pid and a start time are not enough where processes of other PID
namespaces share the temporary directory (containers, a sandboxed CI
job): there the owner's pid names another process or none, and a sweep
would remove a live session's folder and stop its guest.  So the owner
also holds an ``flock`` on the folder's ``owner.lock`` for as long as it
lives (the kernel drops it when the process ends, however it ends, and a
lock is one file's whatever namespace asks), and ``sweep`` takes that lock
before it touches a folder: a folder whose lock is held is left alone
whatever its name says.  Folders without a lock file (made by an older
perfab) are judged by their name.
"""

from __future__ import annotations

import fcntl
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
LOCK_FILE = "owner.lock"  # flocked by the folder's owner while it lives
_HELD: dict[str, int] = {}  # folder -> the descriptor holding its owner lock (closed when the folder is removed)
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
        release(path)


def make(kind: str) -> str:
    """A fresh folder of ``kind`` owned by this process, its owner lock held; the caller removes it."""
    pid = os.getpid()
    folder = tempfile.mkdtemp(prefix=f"perfab-{kind}-{pid}-{start_ticks(pid) or 0}-")
    try:
        fd = os.open(os.path.join(folder, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        _HELD[folder] = fd
    except OSError:
        pass  # no lock: the folder is judged by its name, as before
    return folder


def release(folder: Path | str) -> None:
    """Drop the owner lock of a folder this process made (once the folder is removed)."""
    fd = _HELD.pop(str(folder), None)
    if fd is not None:
        os.close(fd)


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
        if m is None or not folder.is_dir() or str(folder) in _HELD:
            continue
        if _owner_gone(folder) is False or start_ticks(int(m.group(2))) == int(m.group(3)):
            continue  # its owner holds the lock (alive, in this PID namespace or another), or lives by its name
        _stop_child(folder)
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed


def _owner_gone(folder: Path) -> bool | None:
    """Whether ``folder``'s owner lock is free (its owner ended), False while it is held, None without a lock
    file."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return False  # cannot tell: leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


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
