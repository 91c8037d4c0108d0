"""The build cache's guarantees: one builder per entry, entries published whole, their content checked.

A cache entry (``.perfab/cache/<commit>-<key>``) may be shared by several
perfab processes at once: two sessions, a bisect and a run.  ``entry_lock``
holds an exclusive ``flock`` on ``<entry>.lock`` while an entry is looked at
or built, so a second process waits for the first instead of building the
same entry over it.  An entry is built in a fresh directory beside it and
published by ``rename``: a process that sees the entry sees it whole, and a
published entry is never rebuilt in place.  ``content_hash`` is the SHA-256
of every file in the entry (path, executable bit, bytes; a symlink's
target), recorded when it is built, stored with the session, and compared
when the entry is used again: an entry whose files changed is refused.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

LOCK_SUFFIX = ".lock"
# Files of an entry that are not the build: the stamp and log describe it, ``src/.git`` links the checkout to
# its repository (rewritten when the entry is published).
NOT_CONTENT = {"build.log", ".perfab-built", os.path.join("src", ".git")}


@contextmanager
def entry_lock(entry: Path, say: Callable[[str], None]) -> Iterator[None]:
    """Hold the exclusive lock of ``entry`` (waiting, and saying so, while another process holds it)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(entry.parent / f"{entry.name}{LOCK_SUFFIX}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting: another perfab is building {entry.name}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def content_hash(root: Path) -> str:
    """SHA-256 over every file below ``root`` (sorted paths, executable bit, bytes; symlink targets)."""
    h = hashlib.sha256()
    for rel in _files(root):
        path = root / rel
        h.update(rel.encode(errors="surrogateescape") + b"\0")
        if path.is_symlink():
            h.update(b"l" + os.readlink(path).encode(errors="surrogateescape") + b"\0")
            continue
        h.update(b"x" if os.access(path, os.X_OK) else b"f")
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def _files(root: Path) -> list[str]:
    """Relative paths of the files and symlinks below ``root``, sorted, without ``NOT_CONTENT``."""
    found = []
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            rel = os.path.relpath(os.path.join(top, name), root)
            if rel not in NOT_CONTENT:
                found.append(rel)
    return sorted(found)


def aside(entry: Path) -> Path:
    """A fresh directory name beside ``entry`` to build it in (unique to this process)."""
    return entry.parent / f".{entry.name}.building-{os.getpid()}"


def discard(path: Path) -> None:
    """Remove a half-made entry (no stamp: its build never finished)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
