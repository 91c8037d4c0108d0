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
"""

from __future__ import annotations

import re

from perfab.errors import UsageError
from perfab.parsers._base import NUM, ParsedMetric, combined, last_match, metric, missing, slug

OPTIONS = frozenset({"duration_s"})

TOOL = "UnixBench"
_SECTION = re.compile(r"^\d+ CPUs? in system; running (\d+) parallel cop", re.M)
_RESULT = re.compile(rf"^(\S.*?)\s{{2,}}({NUM}) (\w+)\s+\({NUM} s, \d+ samples\)\s*$", re.M)
_INDEX_ROW = re.compile(rf"^(\S.*?)\s{{2,}}({NUM})\s+({NUM})\s+({NUM})\s*$", re.M)
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
    sections = list(_SECTION.finditer(text))
    if sections:
        return _from_report(text, sections)
    return _from_count(text, options.get("duration_s"))


def _from_report(text: str, sections: list[re.Match[str]]) -> dict[str, ParsedMetric]:
    out: dict[str, ParsedMetric] = {}
    for i, head in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        body = text[head.end():end]
        suffix = f"_{head[1]}copies" if i > 0 else ""
        for name, value, unit in _RESULT.findall(body):
            out[f"{slug(name)}_{slug(unit)}{suffix}"] = metric(value, unit, True)
        for name, _baseline, _result, index in _INDEX_ROW.findall(body):
            out[f"{slug(name)}_index{suffix}"] = metric(index, "index", True)
        if score := _SCORE.search(body):
            out[f"index_score{suffix}"] = metric(score[1], "index", True)
    if not out:
        raise missing(TOOL, "result line ('<test>  <value> lps (10.0 s, 7 samples)')")
    return out


def _from_count(text: str, duration_s: float | None) -> dict[str, ParsedMetric]:
    count = last_match(rf"^COUNT\|({NUM})\|(\d+)\|(\w+)\s*$", text)
    if count is None:
        raise missing(TOOL, "'COUNT|n|timebase|unit' line")
    value, timebase, unit = float(count[1]), int(count[2]), count[3]
    if timebase == 0:
        return {f"rate_{slug(unit)}": metric(value, unit, True)}
    out = {"count": metric(value, "count", True)}
    time = last_match(rf"^TIME\|({NUM})\s*$", text)
    seconds = float(time[1]) if time else duration_s
    if seconds:
        out[f"rate_{slug(unit)}"] = metric(value / (seconds / timebase), unit, True)
    return out
