"""RocksDB ``db_bench``: per-benchmark throughput, time per op, bandwidth, percentiles.

One line per benchmark (``fillseq : 3.616 micros/op 276220 ops/sec 0.072
seconds 20000 operations; 30.6 MB/s``) gives ``<bench>_ops_per_s``,
``<bench>_us_per_op`` and ``<bench>_mb_per_s``.  With ``--histogram=1`` the
``Percentiles: P50: ... P99.99: ...`` line that follows a benchmark gives
``<bench>_p50_us`` etc.  Older releases omit the seconds/operations fields.
"""

from __future__ import annotations

import re

from perfab.parsers._base import NUM, ParsedMetric, combined, metric, missing, slug

OPTIONS: frozenset[str] = frozenset()

TOOL = "db_bench"
_BENCH = re.compile(
    rf"^(\w[\w\[\]\-.]*)\s*:\s+({NUM}) micros/op ({NUM}) ops/sec;?"
    rf"(?: ({NUM}) seconds ({NUM}) operations;)?(?:\s+({NUM}) MB/s)?"
)
_PERCENTILES = re.compile(r"^Percentiles:((?:\s+P[\d.]+:\s+\S+)+)")


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics per benchmark; ParseError when no 'micros/op' line is present."""
    out: dict[str, ParsedMetric] = {}
    current = None
    for line in combined(stdout, stderr).splitlines():
        found = _BENCH.match(line)
        if found:
            current = slug(found[1])
            out.update(_bench_metrics(current, found))
            continue
        pct = _PERCENTILES.match(line)
        if pct and current:
            for p, value in re.findall(rf"P([\d.]+):\s+({NUM})", pct[1]):
                out[f"{current}_p{p.replace('.', '_')}_us"] = metric(value, "us", False)
    if not out:
        raise missing(TOOL, "'<benchmark> : ... micros/op ... ops/sec' line")
    return out


def _bench_metrics(name: str, found: re.Match[str]) -> dict[str, ParsedMetric]:
    out = {
        f"{name}_us_per_op": metric(found[2], "us", False),
        f"{name}_ops_per_s": metric(found[3], "ops/s", True),
    }
    if found[4] is not None:
        out[f"{name}_elapsed_s"] = metric(found[4], "s", False)
    if found[6] is not None:
        out[f"{name}_mb_per_s"] = metric(found[6], "MB/s", True)
    return out
