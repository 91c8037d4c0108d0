"""UnixBench (byte-unixbench), written from its source (github.com/kdlucas/byte-unixbench).

Not packaged by Debian.  Two forms, following ``UnixBench/Run``:

- A test program alone (``pgms/syscall 10``) prints ``COUNT|n|timebase|unit``
  and sometimes ``TIME|seconds`` on stderr.  Run keeps the last COUNT; with
  ``timebase`` > 0 the rate is ``n / (time / timebase)`` per ``unit``, with
  ``timebase`` 0 ``n`` is already the rate.  Metrics: ``count`` (work done in
  the fixed duration) and, when a time is known (``TIME|`` or option
  ``duration_s``), ``rate_<unit>`` (``rate_lps``, ``rate_kbps``).
- ``./Run`` prints per-test result lines (``Pipe Throughput  1129219.0 lps
  (10.0 s, 1 samples)``) and an index table per number of parallel copies.
  Metrics: ``<test>_<unit>``, ``<test>_index`` and ``index_score``; when the
  run has several copy counts, sections after the first add ``_<n>copies``.

Every UnixBench result is a rate or a score (the index is result / baseline),
so each is higher-is-better.
"""

from __future__ import annotations

import re

from perfab.errors import UsageError
from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParsedMetric
from perfab.parsers._base import combined, last_match, missing, number

OPTIONS = frozenset({"duration_s"})
OPTION_TYPES = {"duration_s": ("positive number", "seconds a program ran, for its rate")}  # for the README

TOOL = "UnixBench"

METRICS = (
    M("{test}_{unit}", None, True, "./Run result line '<test>  <value> <unit> (...)'; unit as printed (lps, KBps)"),
    M("{test}_index", "index", True, "./Run index table: the test's result / its baseline x 10"),
    M("index_score", "index", True, "'System Benchmarks Index Score': geometric mean of the indexes"),
    M("{test}_{unit}_{n}copies", None, True, "the result line of a later section, run with <n> parallel copies"),
    M("{test}_index_{n}copies", "index", True, "the index of a later section, run with <n> parallel copies"),
    M("index_score_{n}copies", "index", True, "the index score of a later section, run with <n> parallel copies"),
    M("count", "count", True, "a program alone: its last 'COUNT|n|timebase|unit', work done in the fixed time"),
    M("rate_{unit}", None, True, "a program alone: n per unit of time (timebase 0, 'TIME|', or option duration_s)"),
)

_SECTION = re.compile(r"^\d+ CPUs? in system; running (\d+) parallel cop", re.M)
# a test name is words with single spaces between them (possessive, so a long line cannot make the
# search quadratic); two or more spaces separate it from the numbers
_NAME = r"\S+(?: \S+)*+"
_RESULT = re.compile(rf"^({_NAME})[ \t]{{2,}}({NUM}) (\w+)[ \t]+\({NUM} s, \d+ samples\)[ \t]*$", re.M)
_INDEX_ROW = re.compile(rf"^({_NAME})[ \t]{{2,}}({NUM})[ \t]+({NUM})[ \t]+({NUM})[ \t]*$", re.M)
_SCORE = re.compile(rf"^System Benchmarks Index Score.*?\s({NUM})\s*$", re.M)


def prepare(options: dict) -> dict:
    """Check that ``duration_s`` is a positive number."""
    duration = options.get("duration_s")
    if duration is not None and (not isinstance(duration, (int, float)) or duration <= 0):
        raise UsageError(f"unixbench option duration_s must be a positive number of seconds, not {duration!r}")
    return options


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from Run's report, else from a program's COUNT line."""
    text = combined(stdout, stderr)
    out = Collector(TOOL, METRICS)
    sections = list(_SECTION.finditer(text))
    if sections:
        _from_report(out, text, sections)
        return out.result("result line ('<test>  <value> lps (10.0 s, 7 samples)')")
    _from_count(out, text, options.get("duration_s"))
    return out.metrics


def _from_report(out: Collector, text: str, sections: list[re.Match[str]]) -> None:
    for i, head in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        body = text[head.end():end]
        copies = {"n": head[1]} if i > 0 else {}
        suffix = "_{n}copies" if i > 0 else ""
        for test, value, unit in _RESULT.findall(body):
            out.add("{test}_{unit}" + suffix, value, with_unit=unit, test=test, unit=unit, **copies)
        for test, _baseline, _result, index in _INDEX_ROW.findall(body):
            out.add("{test}_index" + suffix, index, test=test, **copies)
        if score := _SCORE.search(body):
            out.add("index_score" + suffix, score[1], **copies)


def _from_count(out: Collector, text: str, duration_s: float | None) -> None:
    count = last_match(rf"^COUNT\|({NUM})\|(\d+)\|(\w+)\s*$", text)
    if count is None:
        raise missing(TOOL, "'COUNT|n|timebase|unit' line")
    timebase, unit = number(count[2], "UnixBench COUNT timebase"), count[3]
    if timebase == 0:
        out.add("rate_{unit}", count[1], with_unit=unit, unit=unit)
        return
    value = out.add("count", count[1]).value
    time = last_match(rf"^TIME\|({NUM})\s*$", text)
    seconds = number(time[1], "UnixBench TIME seconds") if time else duration_s
    if seconds:
        out.add("rate_{unit}", value * timebase / seconds, with_unit=unit, unit=unit)
