"""sysbench 1.x (cpu, memory, threads, mutex; OLTP's transaction lines too).

Common to every test: ``General statistics`` (total time, total events),
``Latency (ms)`` (min/avg/max/percentile/sum) and ``Threads fairness``.
``cpu`` adds ``events per second``; ``memory`` adds ``Total operations: N
(R per second)`` and ``X MiB transferred (R MiB/sec)``.  Tests that print no
rate (threads, mutex) get ``events_per_s`` = total events / total time.
"""

from __future__ import annotations

from perfab.parsers._base import NUM, ParsedMetric, combined, last_match, metric, need, table_metrics

OPTIONS: frozenset[str] = frozenset()

TOOL = "sysbench"

# regex with one group -> (metric name, unit, higher_is_better)
_FIELDS = {
    rf"^\s+events per second:\s+({NUM})": ("events_per_s", "events/s", True),
    rf"^Total operations: \d+ \(({NUM}) per second\)": ("operations_per_s", "ops/s", True),
    rf"^{NUM} MiB transferred \(({NUM}) MiB/sec\)": ("transfer_mib_per_s", "MiB/s", True),
    rf"^\s+transactions:\s+\d+\s+\(({NUM}) per sec\.\)": ("transactions_per_s", "tx/s", True),
    rf"^\s+queries:\s+\d+\s+\(({NUM}) per sec\.\)": ("queries_per_s", "queries/s", True),
    rf"^\s+min:\s+({NUM})": ("latency_min_ms", "ms", False),
    rf"^\s+avg:\s+({NUM})": ("latency_avg_ms", "ms", False),
    rf"^\s+max:\s+({NUM})": ("latency_max_ms", "ms", False),
    rf"^\s+sum:\s+({NUM})": ("latency_sum_ms", "ms", None),
    rf"^\s+events \(avg/stddev\):\s+({NUM})/": ("thread_events_avg", "count", None),
    rf"^\s+events \(avg/stddev\):\s+{NUM}/({NUM})": ("thread_events_stddev", "count", False),
    rf"^\s+execution time \(avg/stddev\):\s+({NUM})/": ("thread_exec_avg_s", "s", None),
}


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from the summary; ParseError without 'total time:'."""
    text = combined(stdout, stderr)
    total = need(rf"^\s+total time:\s+({NUM})s", text, TOOL, "'total time:' line")
    events = need(rf"^\s+total number of events:\s+({NUM})", text, TOOL, "'total number of events:' line")
    out = {
        "total_time_s": metric(total[1], "s", None),
        "total_events": metric(events[1], "count", None),
    }
    out.update(table_metrics(_FIELDS, text))
    if pct := last_match(rf"^\s+(\d+(?:\.\d+)?)th percentile:\s+({NUM})", text):
        out[f"latency_p{pct[1].replace('.', '_')}_ms"] = metric(pct[2], "ms", False)
    if "events_per_s" not in out and out["total_time_s"].value > 0:
        rate = out["total_events"].value / out["total_time_s"].value
        out["events_per_s"] = metric(rate, "events/s", True)
    return out
