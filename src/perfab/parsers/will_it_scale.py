"""will-it-scale, written from its source (github.com/antonblanchard/will-it-scale).

Not packaged by Debian.  A test binary (``main.c``) prints ``testcase:``,
five warm-up seconds of ``min:A max:B total:C`` and, after ``-s N``
measured seconds, ``average:N`` -- operations per second summed over all
tasks.  ``runtest.py`` prints CSV ``tasks,processes,processes_idle,threads,
threads_idle,linear`` with one row per task count.

Metrics: ``ops_per_s`` (the average); with option ``tasks`` (the ``-t``
value) also ``per_task_ops_per_s``, the figure LKP reports as
``per_thread_ops`` / ``per_process_ops``.  From runtest.py CSV:
``processes_<n>tasks_ops_per_s``, ``threads_<n>tasks_ops_per_s`` and the
idle percentages.
"""

from __future__ import annotations

import csv
import re

from perfab.errors import UsageError
from perfab.parsers._base import ParsedMetric, combined, last_match, metric, missing

OPTIONS = frozenset({"tasks"})

_CSV_HEADER = "tasks,processes,processes_idle,threads,threads_idle,linear"


def prepare(options: dict) -> dict:
    """Check that ``tasks`` is a positive integer."""
    tasks = options.get("tasks")
    if tasks is not None and (not isinstance(tasks, int) or isinstance(tasks, bool) or tasks < 1):
        raise UsageError(f"will-it-scale option tasks must be a positive integer (the -t value), not {tasks!r}")
    return options


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from a test binary's ``average:`` line or runtest.py's CSV."""
    text = combined(stdout, stderr)
    if _CSV_HEADER in text:
        return _from_csv(text)
    found = last_match(r"^average:(\d+)\s*$", text)
    if found is None:
        raise missing("will-it-scale", "'average:' line (was the test run with -s N?)")
    out = {"ops_per_s": metric(found[1], "ops/s", True)}
    if options.get("tasks"):
        out["per_task_ops_per_s"] = metric(int(found[1]) / options["tasks"], "ops/s", True)
    return out


def _from_csv(text: str) -> dict[str, ParsedMetric]:
    body = text[text.index(_CSV_HEADER):].splitlines()
    out: dict[str, ParsedMetric] = {}
    for row in csv.DictReader(line for line in body if re.match(r"^[\w.,]+$", line)):
        tasks = int(row["tasks"])
        if tasks == 0:
            continue
        for kind in ("processes", "threads"):
            out[f"{kind}_{tasks}tasks_ops_per_s"] = metric(row[kind], "ops/s", True)
            out[f"{kind}_{tasks}tasks_idle_pct"] = metric(row[f"{kind}_idle"], "%", None)
    return out
