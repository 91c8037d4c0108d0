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

from perfab.parsers._base import NUM, ParseError, ParsedMetric, last_match, metric

OPTIONS: frozenset[str] = frozenset()

_DEFAULT = re.compile(
    rf"({NUM})user ({NUM})system ((?:\d+:)?\d+:{NUM})elapsed (\d+|\?)%CPU "
    r"\((\d+)avgtext\+(\d+)avgdata (\d+)maxresident\)k\n"
    r"(\d+)inputs\+(\d+)outputs \((\d+)major\+(\d+)minor\)pagefaults (\d+)swaps"
)
# -v label -> (metric name, unit, higher_is_better)
_VERBOSE = {
    "User time (seconds)": ("user_s", "s", False),
    "System time (seconds)": ("system_s", "s", False),
    "Maximum resident set size (kbytes)": ("max_rss_kb", "KB", False),
    "Major (requiring I/O) page faults": ("major_page_faults", "count", False),
    "Minor (reclaiming a frame) page faults": ("minor_page_faults", "count", False),
    "Voluntary context switches": ("voluntary_context_switches", "count", False),
    "Involuntary context switches": ("involuntary_context_switches", "count", False),
    "Swaps": ("swaps", "count", False),
    "File system inputs": ("fs_inputs", "count", None),
    "File system outputs": ("fs_outputs", "count", None),
    "Socket messages sent": ("socket_messages_sent", "count", None),
    "Socket messages received": ("socket_messages_received", "count", None),
    "Signals delivered": ("signals_delivered", "count", None),
    "Exit status": ("exit_status", "", None),
}


def elapsed_seconds(text: str) -> float:
    """``'1:02:03.5'`` -> 3723.5; ``'0:00.51'`` -> 0.51."""
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Resource usage from the last report on stderr; ParseError when there is none."""
    out = _verbose(stderr) or _default(stderr)
    if not out:
        raise ParseError("GNU time output has no report on stderr ('...user ...system ...elapsed' "
                         "or 'User time (seconds):'): is the workload wrapped in /usr/bin/time?")
    if found := last_match(r"^Command exited with non-zero status (\d+)", stderr):
        out["exit_status"] = metric(found[1], "", None)
    if found := last_match(r"^Command terminated by signal (\d+)", stderr):
        out["signal"] = metric(found[1], "", None)
    return out


def _verbose(text: str) -> dict[str, ParsedMetric]:
    start = text.rfind("\tCommand being timed:")
    if start < 0:
        return {}
    report = text[start:]
    out = {}
    for label, (name, unit, better) in _VERBOSE.items():
        if found := re.search(rf"^\s+{re.escape(label)}: ({NUM})\s*$", report, re.M):
            out[name] = metric(found[1], unit, better)
    if found := re.search(r"^\s+Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", report, re.M):
        out["elapsed_s"] = metric(elapsed_seconds(found[1]), "s", False)
    if found := re.search(r"^\s+Percent of CPU this job got: (\d+)%", report, re.M):
        out["cpu_pct"] = metric(found[1], "%", None)
    return out


def _default(text: str) -> dict[str, ParsedMetric]:
    found = None
    for found in _DEFAULT.finditer(text):
        pass
    if found is None:
        return {}
    out = {
        "user_s": metric(found[1], "s", False),
        "system_s": metric(found[2], "s", False),
        "elapsed_s": metric(elapsed_seconds(found[3]), "s", False),
        "max_rss_kb": metric(found[7], "KB", False),
        "fs_inputs": metric(found[8], "count", None),
        "fs_outputs": metric(found[9], "count", None),
        "major_page_faults": metric(found[10], "count", False),
        "minor_page_faults": metric(found[11], "count", False),
        "swaps": metric(found[12], "count", False),
    }
    if found[4] != "?":
        out["cpu_pct"] = metric(found[4], "%", None)
    return out
