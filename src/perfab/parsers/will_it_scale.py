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

import re

from perfab.errors import UsageError
from perfab.parsers._base import Collector, DeclaredMetric as M, ParseError, ParsedMetric, combined, last_match, missing

OPTIONS = frozenset({"tasks"})
OPTION_TYPES = {"tasks": ("positive integer", "the -t value: tasks the average is divided by")}  # for the README

TOOL = "will-it-scale"

METRICS = (
    M("ops_per_s", "ops/s", True, "'average:': operations per second summed over all tasks"),
    M("per_task_ops_per_s", "ops/s", True, "with option tasks: the average divided by the number of tasks"),
    M("{kind}_{n}tasks_ops_per_s", "ops/s", True, "runtest.py CSV: operations per second of n processes or threads"),
    M("{kind}_{n}tasks_idle_pct", "%", None, "runtest.py CSV: idle CPU time with n processes or threads"),
)

_CSV_HEADER = "tasks,processes,processes_idle,threads,threads_idle,linear"
_CSV_ROW = re.compile(r"^\d+(?:,[^,]*){5}$", re.ASCII)


def prepare(options: dict) -> dict:
    """Check that ``tasks`` is a positive integer."""
    tasks = options.get("tasks")
    if tasks is not None and (not isinstance(tasks, int) or isinstance(tasks, bool) or tasks < 1):
        raise UsageError(f"will-it-scale option tasks must be a positive integer (the -t value), not {tasks!r}")
    return options


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from a test binary's ``average:`` line or runtest.py's CSV."""
    text = combined(stdout, stderr)
    out = Collector(TOOL, METRICS)
    if _CSV_HEADER in text:
        _from_csv(out, text)
        return out.result("runtest.py CSV row after its header (a task count of 1 or more)")
    found = last_match(r"^average:(\d+)\s*$", text)
    if found is None:
        raise missing(TOOL, "'average:' line (was the test run with -s N?)")
    average = out.add("ops_per_s", found[1])
    if options.get("tasks"):
        out.add("per_task_ops_per_s", average.value / options["tasks"])
    return out.metrics


def _from_csv(out: Collector, text: str) -> None:
    """The rows after the header: ``tasks`` (an integer, 0 is the idle baseline) and five numbers."""
    body = text[text.index(_CSV_HEADER):].splitlines()[1:]
    for line in body:
        if not re.match(r"^[\w.,]+$", line):
            continue
        if not _CSV_ROW.match(line):
            raise ParseError(f"will-it-scale CSV row {line[:40]!r} is not 'tasks' and five numbers: "
                             "check the workload's output")
        row = dict(zip(_CSV_HEADER.split(","), line.split(",")))
        tasks = row["tasks"].lstrip("0")
        if not tasks:
            continue
        for kind in ("processes", "threads"):
            out.add("{kind}_{n}tasks_ops_per_s", row[kind], kind=kind, n=tasks)
            out.add("{kind}_{n}tasks_idle_pct", row[f"{kind}_idle"], kind=kind, n=tasks)
