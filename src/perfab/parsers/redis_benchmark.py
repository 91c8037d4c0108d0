"""``redis-benchmark --csv`` (and ``-q``): requests per second and latency per test.

Redis 6.2+ CSV has a header ``"test","rps","avg_latency_ms",...``; older
releases print rows ``"SET","44247.79"`` with no header.  ``-q`` prints
``SET: 56497.18 requests per second, p50=0.567 msec`` after ``\\r`` progress.
Test names become metric prefixes: ``"MSET (10 keys)"`` -> ``mset_10_keys``.
"""

from __future__ import annotations

import csv
import re

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParseError, ParsedMetric, combined, lines

OPTIONS: frozenset[str] = frozenset()

TOOL = "redis-benchmark"

METRICS = (
    M("{test}_requests_per_s", "req/s", True, "requests per second of one test (CSV 'rps', or -q)"),
    M("{test}_latency_{stat}_ms", "ms", False, "CSV '<stat>_latency_ms' (avg, min, p50, p95, p99, max); -q: p50"),
)

_QUIET = re.compile(rf"^([A-Z][\w ()-]*?): ({NUM}) requests per second(?:, p50=({NUM}) msec)?")


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics per test; ParseError when no CSV row or ``-q`` line is found."""
    text = combined(stdout, stderr)
    out = Collector(TOOL, METRICS)
    _from_csv(out, text)
    for line in lines(text):
        if found := _QUIET.match(line.strip()):
            out.add("{test}_requests_per_s", found[2], test=found[1])
            if found[3] is not None:
                out.add("{test}_latency_{stat}_ms", found[3], test=found[1], stat="p50")
    return out.result("CSV row (\"test\",\"rps\",...) or 'requests per second' line")


def _from_csv(out: Collector, text: str) -> None:
    header: list[str] = ["test", "rps"]
    quoted = [line.rstrip() for line in lines(text) if line.startswith('"')]
    try:  # one row per line: a quote left open never joins the next line's fields
        rows = [next(csv.reader([line]), []) for line in quoted]
    except csv.Error as err:
        raise ParseError(f"redis-benchmark CSV cannot be read ({err}): check the workload's output") from None
    for line, row in zip(quoted, rows):
        if row and row[0] == "test":
            header = row
        elif len(row) >= 2 and re.fullmatch(NUM, row[1]):
            if not line.endswith('"'):  # every field is quoted: the output was cut inside this row's last one
                raise ParseError(f"redis-benchmark CSV row {line[:40]!r} ends inside a field: the output was cut "
                                 "short; check the workload's output")
            for column, value in zip(header[1:], row[1:]):
                _column(out, row[0], column, value)


def _column(out: Collector, test: str, column: str, value: str) -> None:
    if column == "rps":
        out.add("{test}_requests_per_s", value, test=test)
    elif found := re.fullmatch(r"(\w+)_latency_ms", column):
        out.add("{test}_latency_{stat}_ms", value, test=test, stat=found[1])
