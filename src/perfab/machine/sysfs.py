"""Reading and writing the kernel's settings files, and CPU lists.

Every read answers with a string and never raises:

- ``UNAVAILABLE``: the file does not exist (this kernel or machine has no
  such setting, e.g. no cpufreq directory inside a VM);
- ``UNKNOWN``: the file exists but could not be read or made sense of
  (permission denied, a directory, bytes that are not text).

Writes raise ``PerfabError`` naming the file and the fix.  All paths are
taken relative to a ``root`` directory so that a test can point a check at
a tree of real-shaped files instead of ``/``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from perfab.errors import PerfabError

UNAVAILABLE = "unavailable"  # the setting's file does not exist here
UNKNOWN = "unknown"  # the file exists but could not be read or parsed
ABSENT = "absent"  # a tool that is not installed

_MAX_READ_BYTES = 1 << 20  # /proc/cpuinfo on a large machine stays well below


def under(root: Path, path: str) -> Path:
    """``path`` (absolute, as on a live system) placed under ``root``."""
    return root / path.lstrip("/")


def read_text(path: Path) -> str:
    """The whole file, stripped of surrounding whitespace; see module docstring."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_READ_BYTES)
    except FileNotFoundError:
        return UNAVAILABLE
    except (OSError, ValueError):
        return UNKNOWN
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return UNKNOWN


def read_line(path: Path) -> str:
    """The first line of the file (``read_text`` semantics otherwise)."""
    text = read_text(path)
    return text.splitlines()[0].strip() if text else text


def is_missing(value: str) -> bool:
    """True when ``value`` is one of the sentinels rather than a reading."""
    return value in (UNAVAILABLE, UNKNOWN)


def write_text(path: Path, value: str, what: str) -> None:
    """Write ``value`` into an existing settings file, or raise with the fix.

    The file is never created: a missing file means the kernel has no such
    setting, and writing a new file under ``/sys`` or ``/proc`` is impossible.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except FileNotFoundError:
        raise PerfabError(
            f"cannot set {what}: {path} does not exist on this machine"
            " (the kernel or, in a VM, the host does not expose it); there is nothing to set"
        ) from None
    except OSError as err:
        raise _write_error(path, value, what, err) from None
    try:
        os.write(fd, value.encode() + b"\n")
    except OSError as err:
        raise _write_error(path, value, what, err) from None
    finally:
        os.close(fd)


def _write_error(path: Path, value: str, what: str, err: OSError) -> PerfabError:
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PerfabError(
            f"cannot set {what}: writing {path} was refused ({err.strerror});"
            f" run as root, e.g. echo {value} | sudo tee {path}"
        )
    return PerfabError(
        f"cannot set {what} to {value!r}: the kernel rejected the write to {path}"
        f" ({err.strerror or err}); check that the value is supported here"
    )


def parse_cpu_list(text: str) -> list[int]:
    """CPU numbers in a kernel CPU list such as ``0-3,8,10-11``; [] if empty.

    Raises ``ValueError`` for text that is not a CPU list.
    """
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.extend(range(first, last + 1))
    return sorted(set(cpus))


def format_cpu_list(cpus: list[int] | set[int]) -> str:
    """The kernel's compact form of a set of CPU numbers (``0-3,8``)."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(ranges)


def online_cpus(root: Path) -> list[int]:
    """Online CPU numbers from sysfs; falls back to the cpuN directories."""
    text = read_line(under(root, "/sys/devices/system/cpu/online"))
    if not is_missing(text):
        try:
            return parse_cpu_list(text)
        except ValueError:
            pass
    base = under(root, "/sys/devices/system/cpu")
    try:
        names = [p.name for p in base.iterdir()]
    except OSError:
        return []
    return sorted(int(n[3:]) for n in names if n.startswith("cpu") and n[3:].isdigit())
