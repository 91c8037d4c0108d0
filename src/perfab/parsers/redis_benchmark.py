"""``redis-benchmark --csv`` (and ``-q``): requests per second and latency per test.

Redis 6.2+ CSV has a header ``"test","rps","avg_latency_ms",...``; older
releases print rows ``"SET","44247.79"`` with no header.  ``-q`` prints
``SET: 56497.18 requests per second, p50=0.567 msec`` after ``\\r`` progress.
Test names become metric prefixes: ``"MSET (10 keys)"`` -> ``mset_10_keys``.
"""

from __future__ import annotations

import csv
import re

from perfab.parsers._base import NUM, ParsedMetric, combined, lines, metric, missing, slug

OPTIONS: frozenset[str] = frozenset()

TOOL = "redis-benchmark"
_QUIET = re.compile(rf"^([A-Z][\w ()-]*?): ({NUM}) requests per second(?:, p50=({NUM}) msec)?")


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics per test; ParseError when no CSV row or ``-q`` line is found."""
    text = combined(stdout, stderr)
    out = _from_csv(text)
    for line in lines(text):
        if found := _QUIET.match(line.strip()):
            name = slug(found[1])
            out[f"{name}_requests_per_s"] = metric(found[2], "req/s", True)
            if found[3] is not None:
                out[f"{name}_latency_p50_ms"] = metric(found[3], "ms", False)
    if not out:
        raise missing(TOOL, "CSV row (\"test\",\"rps\",...) or 'requests per second' line")
    return out


def _from_csv(text: str) -> dict[str, ParsedMetric]:
    out: dict[str, ParsedMetric] = {}
    header: list[str] = ["test", "rps"]
    rows = [line for line in lines(text) if line.startswith('"')]
    for row in csv.reader(rows):
        if row and row[0] == "test":
            header = row
            continue
        if len(row) < 2 or not re.fullmatch(NUM, row[1]):
            continue
        name = slug(row[0])
        for column, value in zip(header[1:], row[1:]):
            out.update(_column(name, column, value))
    return out


def _column(name: str, column: str, value: str) -> dict[str, ParsedMetric]:
    if column == "rps":
        return {f"{name}_requests_per_s": metric(value, "req/s", True)}
    if found := re.fullmatch(r"(\w+)_latency_ms", column):
        return {f"{name}_latency_{found[1]}_ms": metric(value, "ms", False)}
    return {}
