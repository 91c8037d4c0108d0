"""sysbench 1.x (cpu, memory, threads, mutex; OLTP's transaction lines too).

Common to every test: ``General statistics`` (total time, total events),
``Latency (ms)`` (min/avg/max/percentile/sum) and ``Threads fairness``.
``cpu`` adds ``events per second``; ``memory`` adds ``Total operations: N
(R per second)`` and ``X MiB transferred (R MiB/sec)``.  Tests that print no
rate (threads, mutex) get ``events_per_s`` = total events / total time.
"""

from __future__ import annotations

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParsedMetric, combined, last_match, need

OPTIONS: frozenset[str] = frozenset()

TOOL = "sysbench"

METRICS = (
    M("total_time_s", "s", None, "'total time:': the test's duration"),
    M("total_events", "count", None, "'total number of events:'"),
    M("events_per_s", "events/s", True, "'events per second:' (cpu), else total events / total time"),
    M("operations_per_s", "ops/s", True, "memory: 'Total operations: N (R per second)'"),
    M("transfer_mib_per_s", "MiB/s", True, "memory: 'X MiB transferred (R MiB/sec)'"),
    M("transactions_per_s", "tx/s", True, "OLTP: 'transactions: N (R per sec.)'"),
    M("queries_per_s", "queries/s", True, "OLTP: 'queries: N (R per sec.)'"),
    M("latency_min_ms", "ms", False, "'Latency (ms)' min"),
    M("latency_avg_ms", "ms", False, "'Latency (ms)' avg"),
    M("latency_max_ms", "ms", False, "'Latency (ms)' max"),
    M("latency_p{N}_ms", "ms", False, "'Latency (ms)' Nth percentile (--percentile, 95 by default)"),
    M("latency_sum_ms", "ms", None, "'Latency (ms)' sum over all events"),
    M("thread_events_avg", "count", None, "'Threads fairness' events per thread, mean"),
    M("thread_events_stddev", "count", False, "'Threads fairness' events per thread, standard deviation"),
    M("thread_exec_avg_s", "s", None, "'Threads fairness' execution time per thread, mean"),
)

# regex with one group -> metric name
_FIELDS = {
    rf"^[ \t]+events per second:\s+({NUM})": "events_per_s",
    rf"^Total operations: \d+ \(({NUM}) per second\)": "operations_per_s",
    rf"^{NUM} MiB transferred \(({NUM}) MiB/sec\)": "transfer_mib_per_s",
    rf"^[ \t]+transactions:\s+\d+\s+\(({NUM}) per sec\.\)": "transactions_per_s",
    rf"^[ \t]+queries:\s+\d+\s+\(({NUM}) per sec\.\)": "queries_per_s",
    rf"^[ \t]+min:\s+({NUM})": "latency_min_ms",
    rf"^[ \t]+avg:\s+({NUM})": "latency_avg_ms",
    rf"^[ \t]+max:\s+({NUM})": "latency_max_ms",
    rf"^[ \t]+sum:\s+({NUM})": "latency_sum_ms",
    rf"^[ \t]+events \(avg/stddev\):\s+({NUM})/": "thread_events_avg",
    rf"^[ \t]+events \(avg/stddev\):\s+{NUM}/({NUM})": "thread_events_stddev",
    rf"^[ \t]+execution time \(avg/stddev\):\s+({NUM})/": "thread_exec_avg_s",
}


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from the summary; ParseError without 'total time:'."""
    text = combined(stdout, stderr)
    out = Collector(TOOL, METRICS)
    total = out.add("total_time_s", need(rf"^[ \t]+total time:\s+({NUM})s", text, TOOL, "'total time:' line")[1])
    events = need(rf"^[ \t]+total number of events:\s+({NUM})", text, TOOL, "'total number of events:' line")
    events = out.add("total_events", events[1])
    out.table(_FIELDS, text)
    if pct := last_match(rf"^[ \t]+(\d+(?:\.\d+)?)th percentile:\s+({NUM})", text):
        out.add("latency_p{N}_ms", pct[2], N=pct[1])
    if "events_per_s" not in out.metrics and total.value > 0:
        out.add("events_per_s", events.value / total.value)
    return out.metrics
