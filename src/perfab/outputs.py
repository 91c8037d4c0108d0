"""Files perfab writes on request (``-o``, ``--html``): never an input, never half-written.

An output path that resolves to one of the command's inputs (the results
database or its ``-wal``/``-shm``/``-journal`` companions, the spec, an ELF
file given to ``perfab size``, and what an experiment reads as
``perfab.inputs`` lists it: workload programs, kernel images and symbols,
files copied into guests, build products) is refused before anything is
written:
following a symlink, a ``..`` or a hard link to the same file counts as the
same file.  A report is written to a temporary file in the target's
directory and renamed over the target, so a reader never sees half a report
and an interrupted write leaves the old file as it was.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from perfab.errors import UsageError

SQLITE_COMPANIONS = ("", "-wal", "-shm", "-journal")


def database_inputs(db: str | Path) -> list[str]:
    """The files a SQLite database ``db`` consists of (none for a PostgreSQL URL)."""
    from perfab.store import is_postgres_url

    if is_postgres_url(db):
        return []
    return [f"{db}{suffix}" for suffix in SQLITE_COMPANIONS]


def refuse_input(output: str | Path, inputs: dict[str, str | Path], dirs: dict[str, str] | None = None) -> None:
    """A ``UsageError`` when ``output`` is the same file as one of ``inputs`` (``{path: what it is}``) or lies in
    one of ``dirs`` (``{directory: what it is}``: build products, files copied into guests)."""
    out = _identity(output)
    for path, what in inputs.items():
        if out == _identity(path) or (out[1] is not None and out[1] == _identity(path)[1]):
            raise UsageError(f"output {str(output)!r} is the {what} {str(path)!r}; writing it would destroy "
                             "the input: give another output path")
    for path, what in (dirs or {}).items():
        top = os.path.realpath(path)
        if out[0] == top or out[0].startswith(top.rstrip("/") + "/"):
            raise UsageError(f"output {str(output)!r} is inside the {what} {str(path)!r}, whose files are inputs; "
                             "give an output path outside it")


def _identity(path: str | Path) -> tuple[str, tuple[int, int] | None]:
    """The resolved path and, for an existing file, its (device, inode): a hard link is the same file."""
    real = os.path.realpath(os.fspath(path))
    try:
        st = os.stat(real)
    except OSError:
        return real, None
    return real, (st.st_dev, st.st_ino)


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it; a device or FIFO is written in place."""
    target = Path(os.path.realpath(os.fspath(path)))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise _unwritable(path, e) from None
    if mode is not None and not stat.S_ISREG(mode):
        _write_in_place(path, target, text, mode)
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise _unwritable(path, e) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as e:
        _remove(tmp)
        raise _unwritable(path, e) from None
    except BaseException:
        _remove(tmp)
        raise


def _write_in_place(path: str | Path, target: Path, text: str, mode: int) -> None:
    """A terminal, ``/dev/null`` or a pipe: nothing to rename over, so write it directly."""
    if stat.S_ISDIR(mode):
        raise UsageError(f"cannot write the report to {path}: it is a directory; give a file path")
    try:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise _unwritable(path, e) from None


def _unwritable(path: str | Path, e: OSError) -> UsageError:
    return UsageError(f"cannot write the report to {path}: {e.strerror or e}; give a writable path")


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
