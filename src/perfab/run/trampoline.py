"""The small exec helper (``perfab-exec.c``) that keeps a workload's rusage its own.

Linux folds the RSS high-water mark of the process that calls exec into the
new program's maxrss (fs/exec.c, ``setmax_mm_hiwater_rss``), so a workload
spawned straight from perfab would report perfab's own peak RSS.  The helper
is a few kilobytes of C: it vforks, its child execs the workload, and it
reports the child's rusage and wall time (fork to reap) on a pipe.

It is compiled on first use with the system C compiler into perfab's cache
directory, keyed by the source's hash; without a compiler perfab spawns the
workload directly and leaves max RSS out where it cannot be the workload's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SOURCE = Path(__file__).with_name("perfab-exec.c")


@dataclass(frozen=True)
class Report:
    """What the helper measured for the workload it ran."""

    wall_s: float  # fork to reap
    user_s: float  # the workload's user CPU time
    sys_s: float  # the workload's system CPU time
    max_rss_kb: int  # the workload's own peak RSS
    nvcsw: int  # voluntary context switches
    nivcsw: int  # involuntary context switches


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfab"


@lru_cache(maxsize=1)
def helper_path() -> str | None:
    """The compiled helper, building it if needed; None when no C compiler can."""
    source = SOURCE.read_bytes()
    target = cache_dir() / f"perfab-exec-{hashlib.sha256(source).hexdigest()[:12]}"
    if target.exists():
        return str(target)
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".perfab-exec-")
        os.close(fd)
        build = [cc, "-O2", "-o", tmp, str(SOURCE)]
        # Static when the C library allows it: no dynamic loader on every run.
        if subprocess.run([*build, "-static"], capture_output=True, timeout=120).returncode != 0:
            subprocess.run(build, check=True, capture_output=True, timeout=120)
        os.replace(tmp, target)  # atomic: concurrent builders agree
    except (OSError, subprocess.SubprocessError):
        return None
    return str(target)


def parse_report(line: bytes) -> Report | int | None:
    """A ``Report``, an errno (the program could not be executed), or None (no report: killed)."""
    fields = line.split()
    try:
        if len(fields) == 2 and fields[0] == b"exec":
            return int(fields[1])
        if len(fields) == 6:
            wall, utime, stime, rss, nv, niv = (int(f) for f in fields)
            return Report(wall / 1e9, utime / 1e6, stime / 1e6, rss, nv, niv)
    except ValueError:
        pass
    return None
