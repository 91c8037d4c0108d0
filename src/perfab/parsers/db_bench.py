"""RocksDB ``db_bench``: per-benchmark throughput, time per op, bandwidth, percentiles.

One line per benchmark (``fillseq : 3.616 micros/op 276220 ops/sec 0.072
seconds 20000 operations; 30.6 MB/s``) gives ``<bench>_ops_per_s``,
``<bench>_us_per_op`` and ``<bench>_mb_per_s``.  With ``--histogram=1`` the
``Percentiles: P50: ... P99.99: ...`` line that follows a benchmark gives
``<bench>_p50_us`` etc.  Older releases omit the seconds/operations fields.
"""

from __future__ import annotations

import re

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParseError, ParsedMetric, combined

OPTIONS: frozenset[str] = frozenset()

TOOL = "db_bench"

METRICS = (
    M("{bench}_us_per_op", "us", False, "'micros/op': mean time per operation of one benchmark"),
    M("{bench}_ops_per_s", "ops/s", True, "'ops/sec': operations per second of one benchmark"),
    M("{bench}_elapsed_s", "s", False, "'seconds': the benchmark's run time (newer releases)"),
    M("{bench}_mb_per_s", "MB/s", True, "'MB/s': bytes per second of benchmarks that move data"),
    M("{bench}_p{N}_us", "us", False, "'Percentiles:' (--histogram=1): percentile N of the time per operation"),
)

_BENCH = re.compile(
    rf"^(\w[\w\[\]\-.]*)\s*:\s+({NUM}) micros/op ({NUM}) ops/sec;?"
    rf"(?: ({NUM}) seconds ({NUM}) operations;)?(?:\s+({NUM}) MB/s)?"
)
_PERCENTILES = re.compile(r"^Percentiles:((?:\s+P[\d.]+:\s+\S+)+)")


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics per benchmark; ParseError when no 'micros/op' line is present."""
    out = Collector(TOOL, METRICS)
    current = None
    for line in combined(stdout, stderr).splitlines():
        if found := _BENCH.match(line):
            current = found[1]
            _bench_metrics(out, current, found)
        elif " micros/op" in line:  # a result line that cannot be read: its percentiles would go to the last one
            raise ParseError(f"db_bench result line {line.strip()[:60]!r} cannot be read: check the workload's "
                             "output (cut short or damaged)")
        elif (pct := _PERCENTILES.match(line)) and current:
            for p, value in re.findall(rf"P([\d.]+):\s+({NUM})", pct[1]):
                out.add("{bench}_p{N}_us", value, bench=current, N=p)
    return out.result("'<benchmark> : ... micros/op ... ops/sec' line")


def _bench_metrics(out: Collector, bench: str, found: re.Match[str]) -> None:
    out.add("{bench}_us_per_op", found[2], bench=bench)
    out.add("{bench}_ops_per_s", found[3], bench=bench)
    if found[4] is not None:
        out.add("{bench}_elapsed_s", found[4], bench=bench)
    if found[6] is not None:
        out.add("{bench}_mb_per_s", found[6], bench=bench)
