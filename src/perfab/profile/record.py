"""Sample one run with ``perf record`` and read its per-symbol self time.

``ProfileRecorder.wrap`` puts ``perf record`` in front of a run's argv;
``collect`` runs ``perf report`` on the file it wrote and returns the share
of samples spent in each symbol itself (not in its callees), keyed as
``perfab.profile.parse`` describes.

The default event is ``cycles`` when the machine has a CPU PMU and
``cpu-clock`` otherwise (a guest without a virtual PMU).  A wrong guess does
no harm: perf falls back from ``cycles`` to ``cpu-clock`` by itself, and the
keys name the event perf reports it sampled.

``perf record`` runs in the caller's environment, because the workload
inherits it; only ``perf report``, whose output is parsed, runs with
``LC_ALL=C``.  perf's own messages from ``record`` go to the run's stderr.

perf's build-id cache (``~/.debug``) is kept out of it: ``record`` does not
add to it (``--no-buildid-cache``) and ``report`` looks in an empty
directory instead (``--buildid-dir``), so symbols come from the binaries on
disk as they are when ``collect`` runs, straight after the run.  Through the
cache, two binaries whose loaded bytes are identical (so their build-ids
are) but whose symbol names differ would both be reported under the names
of whichever was cached first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from perfab.errors import ToolError, UsageError
from perfab.profile.parse import NO_SAMPLES, parse_report

EVENT_SOURCES = Path("/sys/bus/event_source/devices")
PERF_DATA = "perf.data"
NO_BUILDID_CACHE = "perf.buildid"  # a directory name in scratch that is never created
REPORT_ARGS = (
    "--stdio", "--no-children", "-g", "none", "--sort", "dso,sym",
    "-F", "overhead,period,sample,dso,sym", "-t", ";",
)  # fmt: skip
_CPU_PMU = re.compile(r"^(cpu|cpu_core|cpu_atom|armv\w+|riscv_pmu)$")
_EVENT_NAME = re.compile(r"^[\w.:/=,-]+$")


def default_event(sources: Path = EVENT_SOURCES) -> str:
    """``cycles`` if ``sources`` lists a CPU PMU (``cpu``, ``cpu_core``, ``armv8_*``), else ``cpu-clock``."""
    try:
        names = [p.name for p in sources.iterdir()]
    except OSError:
        return "cpu-clock"
    return "cycles" if any(_CPU_PMU.match(n) for n in names) else "cpu-clock"


def _check_event(event: str) -> str:
    if not _EVENT_NAME.match(event):
        raise UsageError(f"profile event {event!r} is not a perf event name; use one event, e.g. 'cpu-clock'")
    if "," in re.sub(r"/[^/]*/", "", event):
        raise UsageError(f"profile event {event!r} lists several events; a profile samples one event")
    return event


class ProfileRecorder:
    """Wraps a run in ``perf record`` and reads the self-time shares back."""

    def __init__(self, event: str | None = None, freq: int = 999, callgraph: bool = False) -> None:
        if isinstance(freq, bool) or not isinstance(freq, int) or freq <= 0:
            raise UsageError(f"profile freq must be a positive number of samples per second, not {freq!r}")
        self.event = _check_event(event) if event is not None else default_event()  # event to sample
        self.freq = freq  # samples per second
        self.callgraph = callgraph  # record call chains (-g) for later inspection of perf.data

    def wrap(self, argv: list[str], scratch: Path) -> list[str]:
        """``perf record --no-buildid-cache -e <event> -F <freq> [-g] -o <scratch>/perf.data -- argv``."""
        if not argv:
            raise UsageError("nothing to profile: the run's argv is empty; give the workload command")
        cmd = ["perf", "record", "--no-buildid-cache", "-e", self.event, "-F", str(self.freq)]
        if self.callgraph:
            cmd.append("-g")
        return [*cmd, "-o", str(Path(scratch) / PERF_DATA), "--", *argv]

    def collect(self, scratch: Path) -> dict[str, float]:
        """Self share in percent per ``self.<event>:<level>.<symbol>`` key (sums to 100)."""
        data = Path(scratch) / PERF_DATA
        text = run_report(data)
        return parse_report(text, where=str(data)).self_shares()


def run_report(data: Path) -> str:
    """The text of ``perf report`` (``REPORT_ARGS``) on ``data``; ``ToolError`` if perf fails."""
    if shutil.which("perf") is None:
        raise ToolError("perf is not installed; install it (Debian: apt-get install linux-perf)")
    if not data.is_file():
        raise ToolError(f"{data} does not exist: perf record did not run or failed; see the run's stderr")
    cmd = ["perf", "--buildid-dir", str(data.parent / NO_BUILDID_CACHE), "report", "-i", str(data)]
    env = {**os.environ, "LC_ALL": "C"}
    proc = subprocess.run([*cmd, *REPORT_ARGS], capture_output=True, text=True, env=env, check=False)
    if "has no samples" in proc.stderr:
        raise ToolError(f"{data}: {NO_SAMPLES}")
    if proc.returncode != 0:
        reason = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise ToolError(f"perf report failed on {data}: {reason[0]}; check that perf record finished")
    return proc.stdout
