"""The ``perf`` backend: each run wrapped in ``perf stat`` carrying one counter group.

Output format: JSON (``-j``) written with ``-o`` into the run's scratch
directory.  JSON rather than CSV because CSV prints ``msec`` counts
(``task-clock``) with two decimals, 10 us steps that matter on short runs,
while JSON keeps six (1 ns); its named keys also make rows self-describing,
and event names with commas (``cpu/event=0x3c,umask=0/``) cannot shift
fields.  perf releases from before 2022 lack ``-j``; they stop with exit 129
and ``collect`` says so.

Rows are matched to the requested events by position: perf 6.1 prints both
``L1-icache-load-misses:u`` and ``:k`` as ``L1-icache-load-misses``.  A
counter is used only when it ran 100% of the time; multiplexed,
``<not counted>`` and ``<not supported>`` rows land in ``excluded`` with the
reason.

Failures perf hides: when the workload dies from a signal perf still exits 0
and writes complete counts; its only trace is perf's ``psignal`` line
(``sh: Segmentation fault``) as the last line of its stderr.  ``collect``
reads that from ``scratch / STDERR_NAME``, which the runner fills with the
wrapped command's stderr.

A second one: perf 6.1 calls ``wait4`` on its workload only if its SIGCHLD
handler has not run yet, so a workload that exits within perf's start-up
window is never waited for: perf exits 0, prints no signal, and its rusage
tool events read ``<not counted>`` (seen in 9 of 300 runs of
``sh -c 'exit 3'`` here).  A process that ran always has user + system time
> 0, so both being ``<not counted>`` identifies the lost status.  ``wrap``
therefore always appends ``user_time`` and ``system_time`` (software, free)
and ``collect`` fails such a run; they are reported only when requested.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from perfab.errors import UsageError
from perfab.metrics import Metric, resolve
from perfab.run.backends.base import Measurement, SameForEverySide
from perfab.run.backends.perfderived import derived_names, derived_metrics
from perfab.run.backends.perfparse import PerfRow, PerfStatParseError, exclusion, parse_json
from perfab.run.backends.perfsched import check_events, schedule_groups, split_modifiers
from perfab.specfile.backends import PERF

OUTPUT_NAME = "perf.stat"  # perf's -o file in the scratch directory
STDERR_NAME = "stderr"  # the wrapped command's stderr, saved by the runner
_TOOL_TIMES = ("user_time", "system_time")  # rusage tool events, always counted: see the module docstring
_SIGNAL_TEXT = {signal.strsignal(n): n for n in range(1, signal.NSIG) if signal.strsignal(n)}


class PerfStatBackend(SameForEverySide, declaration=PERF):
    """Counts hardware and software events with ``perf stat``; see the module docstring."""

    stderr_file = STDERR_NAME  # perf's last words (a signal death) are read from the run's stderr

    def __init__(self, counters: list[str], max_events_per_run: int | None = None, perf: str = "perf") -> None:
        if not counters:
            raise UsageError('backend "perf" needs counters: list the events to count, e.g. ["cycles", "instructions"]')
        check_events(counters)
        self.counters = list(counters)
        self.perf = perf
        if max_events_per_run is None:
            self._groups: tuple[tuple[str, ...], ...] = (tuple(counters),)
        else:
            self._groups = schedule_groups(self.counters, max_events_per_run)

    @classmethod
    def from_measure(cls, measure) -> "PerfStatBackend":
        """The counters of ``[measure]``, grouped within ``max_events_per_run``."""
        return cls(list(measure.counters), measure.max_events_per_run)

    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The counter groups; one group with every counter when no budget was given."""
        return self._groups

    def wrap(self, argv: list[str], scratch: Path, group: tuple[str, ...]) -> list[str]:
        """``perf stat -j -o <scratch>/perf.stat -e <group>[,user_time,system_time] -- argv``; run with LC_ALL=C."""
        output = str(Path(scratch) / OUTPUT_NAME)
        return [self.perf, "stat", "-j", "-o", output, "-e", ",".join(_with_tool_times(group)), "--", *argv]

    def collect(self, scratch: Path, group: tuple[str, ...], status: int) -> Measurement:
        """Read the counts of one run; ``status`` is perf's raw wait status."""
        scratch = Path(scratch)
        stderr = _read(scratch / STDERR_NAME) or ""
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            return Measurement({}, failure=f"perf stat was killed by {_signame(-code)}; the run was interrupted")
        text = _read(scratch / OUTPUT_NAME)
        if text is None:
            return Measurement({}, failure=_no_counts(code, stderr, False))
        return read_counts(text, group, stderr, code)

    def service_counter(self, group: tuple[str, ...], scratch: Path, pids: list[int], cpus: str | None):
        """``perf stat`` on the service's pids (or ``cpus``) for one run, with the group's hardware events."""
        from perfab.run.backends.perfservice import ServiceCounter

        events = tuple(e for e in group if not e.endswith(("_time", "duration_time")))
        return ServiceCounter(self.perf, events, scratch, pids=pids, cpus=cpus)

    def metric_info(self) -> dict[str, Metric]:
        """Units and directions of every counter and derived metric."""
        return {name: resolve(name) for name in (*self.counters, *derived_names(self._groups))}


def read_counts(text: str, group: tuple[str, ...], stderr: str, code: int = 0) -> Measurement:
    """perf's JSON ``text`` for a run carrying ``group`` (plus the tool times), read by this backend's rules;
    also what a guest's perf printed (``perfab.run.backends.vpmu``).  ``code``: perf's exit code."""
    try:
        rows = parse_json(text).counters()
    except PerfStatParseError as err:
        return Measurement({}, failure=str(err))
    if not rows:
        return Measurement({}, failure=_no_counts(code, stderr, True))
    events = _with_tool_times(group)
    if len(rows) != len(events):
        return Measurement({}, failure=_row_mismatch(rows, events))
    if (bad := _misnamed(rows, events)) is not None:
        return Measurement({}, failure=bad)
    return _measurement(dict(zip(events, rows)), group, stderr)


def _with_tool_times(group: tuple[str, ...]) -> tuple[str, ...]:
    """The events perf is asked for: the group, then the rusage times it lacks."""
    return (*group, *(t for t in _TOOL_TIMES if t not in group))


def _measurement(rows: dict[str, PerfRow], group: tuple[str, ...], stderr: str) -> Measurement:
    lost = all(rows[t].status == "not counted" for t in _TOOL_TIMES)
    metrics: dict[str, float] = {}
    excluded: dict[str, str] = {}
    notes: list[str] = []
    for event in group:
        row = rows[event]
        if event in _TOOL_TIMES and row.status == "not counted" and not lost:
            metrics[event] = 0.0
            notes.append(f"{event}: perf printed <not counted> for a zero rusage time; recorded as 0")
        elif event in _TOOL_TIMES and lost:
            excluded[event] = "perf stat lost the workload's rusage (see the run's failure)"
        elif (reason := exclusion(row)) is not None:
            excluded[event] = reason
        else:
            metrics[event] = float(row.value)  # type: ignore[arg-type]
    metrics.update(derived_metrics(metrics))
    failure = _hidden_failure(stderr, lost)
    return Measurement(metrics, excluded, tuple(notes), failure, _workload_rusage(rows, lost),
                       transient=lost and failure is not None and _killed_by(stderr) is None)


def _workload_rusage(rows: dict[str, PerfRow], lost: bool) -> dict[str, float]:
    """The workload's own user and system time: perf's wait4 rusage of it (tool events, ns)."""
    if lost:
        return {}
    out = {}
    for event, name in (("user_time", "user_s"), ("system_time", "sys_s")):
        row = rows[event]
        if row.status == "not counted":
            out[name] = 0.0  # perf prints <not counted> for a zero time
        elif row.status == "ok" and row.value is not None:
            out[name] = float(row.value) / 1e9
    return out


def _hidden_failure(stderr: str, lost: bool) -> str | None:
    """A workload failure perf stat's exit status does not show (see the module docstring)."""
    killed = _killed_by(stderr)
    if killed is not None:
        return f"workload killed by {_signame(killed[0])} (perf stat exits 0 then; its stderr ends {killed[1]!r})"
    if lost:
        return ("perf stat lost the workload's exit status (the workload ended before perf waited for it;"
                " user_time and system_time both <not counted>): lengthen the workload or rerun")  # fmt: skip
    return None


def _no_counts(code: int, stderr: str, wrote_file: bool) -> str:
    message = _perf_message(stderr)
    said = f": {message}" if message else ""
    if code == 129:
        return (f"perf stat rejected its command line (exit 129){said}; check the counter names with"
                " `perf list` (and that this perf has -j: releases since 2022)")  # fmt: skip
    if code == 255 and "not supported" in message:
        return (f"perf stat could not open the counter group (exit 255){said}; remove the event"
                " or see `perfab counters`")  # fmt: skip
    if message.startswith("Workload failed"):
        return f"perf stat could not start the workload (exit {code}){said}; check the command"
    where = "an output file without counts" if wrote_file else "no output file"
    return f"perf stat left {where} (exit {code}){said}; run the wrapped command by hand to see why"


def _perf_message(stderr: str) -> str:
    """perf's own error line: the line after ``Error:``, or a known one-line complaint."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line == "Error:" and i + 1 < len(lines):
            return lines[i + 1]
        if line.startswith(("Workload failed:", "event syntax error:", "Error:", "Cannot find", "unknown")):
            return line
    return ""


def _row_mismatch(rows: tuple[PerfRow, ...], group: tuple[str, ...]) -> str:
    return (f"perf stat printed {len(rows)} counter rows for {len(group)} events ({', '.join(group)});"
            " an event expanded to several PMUs (hybrid CPU?): request PMU-qualified events"
            " such as cpu_core/cycles/")  # fmt: skip


def _misnamed(rows: tuple[PerfRow, ...], group: tuple[str, ...]) -> str | None:
    for event, row in zip(group, rows):
        if split_modifiers(event)[0].lower() != split_modifiers(row.event)[0].lower():
            return (f"perf stat printed {row.event!r} where {event!r} was expected; the rows cannot be"
                    " matched to the requested events safely: report this with perf's output")  # fmt: skip
    return None


def _killed_by(stderr: str) -> tuple[int, str] | None:
    """The signal named by perf's psignal line (``argv0: Description``) ending stderr."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines or ": " not in lines[-1]:
        return None
    number = _SIGNAL_TEXT.get(lines[-1].rsplit(": ", 1)[1].strip())
    return (number, lines[-1].strip()) if number else None


def _signame(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None
