"""GNU time (``/usr/bin/time``): the default two-line format and ``-v``.

Default::

    0.14user 0.04system 0:00.51elapsed 35%CPU (0avgtext+0avgdata 13400maxresident)k
    0inputs+0outputs (0major+9473minor)pagefaults 0swaps

``-v`` prints one ``Label: value`` line per field.  Elapsed time is
``[h:]m:ss.cc``.  A failed command adds ``Command exited with non-zero
status N`` or ``Command terminated by signal N``.  The workload's own
stderr precedes the report, so the last report in the text wins.
"""

from __future__ import annotations

import re

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParseError, ParsedMetric, last_match

OPTIONS: frozenset[str] = frozenset()

TOOL = "GNU time"

METRICS = (
    M("user_s", "s", False, "user CPU time"),
    M("system_s", "s", False, "system CPU time"),
    M("elapsed_s", "s", False, "wall-clock time"),
    M("cpu_pct", "%", None, "(user + system) / elapsed; absent when time printed '?'"),
    M("max_rss_kb", "KB", False, "maximum resident set size"),
    M("major_page_faults", "count", False, "page faults that needed I/O"),
    M("minor_page_faults", "count", False, "page faults served without I/O"),
    M("voluntary_context_switches", "count", False, "-v: the process gave up the CPU (waiting)"),
    M("involuntary_context_switches", "count", False, "-v: the process was preempted"),
    M("swaps", "count", False, "times the process was swapped out"),
    M("fs_inputs", "count", None, "file system inputs (512-byte blocks)"),
    M("fs_outputs", "count", None, "file system outputs (512-byte blocks)"),
    M("socket_messages_sent", "count", None, "-v: socket messages sent"),
    M("socket_messages_received", "count", None, "-v: socket messages received"),
    M("signals_delivered", "count", None, "-v: signals delivered to the process"),
    M("exit_status", "", None, "-v 'Exit status', or 'Command exited with non-zero status N'"),
    M("signal", "", None, "'Command terminated by signal N'"),
)

# unanchored (a workload's stderr may end without a newline); the look-behind keeps a search
# from restarting inside every digit of a long number, which made it quadratic
_DEFAULT = re.compile(
    rf"(?<![\d.,])({NUM})user ({NUM})system ((?:\d+:)?\d+:{NUM})elapsed (\d+|\?)%CPU "
    r"\((\d+)avgtext\+(\d+)avgdata (\d+)maxresident\)k\n"
    r"(\d+)inputs\+(\d+)outputs \((\d+)major\+(\d+)minor\)pagefaults (\d+)swaps"
)
# group of _DEFAULT -> metric name (elapsed and %CPU apart)
_DEFAULT_GROUPS = {1: "user_s", 2: "system_s", 7: "max_rss_kb", 8: "fs_inputs", 9: "fs_outputs",
                   10: "major_page_faults", 11: "minor_page_faults", 12: "swaps"}  # fmt: skip
# -v label -> metric name
_VERBOSE = {
    "User time (seconds)": "user_s",
    "System time (seconds)": "system_s",
    "Maximum resident set size (kbytes)": "max_rss_kb",
    "Major (requiring I/O) page faults": "major_page_faults",
    "Minor (reclaiming a frame) page faults": "minor_page_faults",
    "Voluntary context switches": "voluntary_context_switches",
    "Involuntary context switches": "involuntary_context_switches",
    "Swaps": "swaps",
    "File system inputs": "fs_inputs",
    "File system outputs": "fs_outputs",
    "Socket messages sent": "socket_messages_sent",
    "Socket messages received": "socket_messages_received",
    "Signals delivered": "signals_delivered",
    "Exit status": "exit_status",
}
_ELAPSED = re.compile(rf"(?:(\d+):)?(\d+):({NUM})")


def elapsed_seconds(text: str) -> float:
    """``'1:02:03.5'`` -> 3723.5; ``'0:00.51'`` -> 0.51; ParseError for any other form."""
    found = _ELAPSED.fullmatch(text)
    if found is None:
        raise ParseError(f"GNU time elapsed time {text[:40]!r} is not [h:]m:ss.cc: check the workload's output")
    hours, minutes, seconds = found.groups()
    return (float(hours or 0) * 60 + float(minutes)) * 60 + float(seconds)


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Resource usage from the last report on stderr; ParseError when there is none."""
    out = Collector(TOOL, METRICS)
    _verbose(out, stderr) or _default(out, stderr)
    if not out.metrics:
        raise ParseError("GNU time output has no report on stderr ('...user ...system ...elapsed' "
                         "or 'User time (seconds):'): is the workload wrapped in /usr/bin/time?")
    if found := last_match(r"^Command exited with non-zero status (\d+)", stderr):
        out.add("exit_status", found[1])
    if found := last_match(r"^Command terminated by signal (\d+)", stderr):
        out.add("signal", found[1])
    return out.metrics


def _verbose(out: Collector, text: str) -> bool:
    """The last ``-v`` report; False when there is none (or it has no field)."""
    start = text.rfind("\tCommand being timed:")
    if start < 0:
        return False
    report = text[start:]
    for label, name in _VERBOSE.items():
        if found := re.search(rf"^[ \t]+{re.escape(label)}: ({NUM})\s*$", report, re.M):
            out.add(name, found[1])
    if found := re.search(r"^[ \t]+Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", report, re.M):
        out.add("elapsed_s", elapsed_seconds(found[1]))
    if found := re.search(r"^[ \t]+Percent of CPU this job got: (\d+)%", report, re.M):
        out.add("cpu_pct", found[1])
    return bool(out.metrics)


def _default(out: Collector, text: str) -> None:
    """The last default-format report, if there is one."""
    found = None
    for found in _DEFAULT.finditer(text):
        pass
    if found is None:
        return
    for group, name in _DEFAULT_GROUPS.items():
        out.add(name, found[group])
    out.add("elapsed_s", elapsed_seconds(found[3]))
    if found[4] != "?":
        out.add("cpu_pct", found[4])
