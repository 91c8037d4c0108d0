"""ApacheBench (``ab``): throughput, per-request time, failures, latency percentiles.

Reads the summary ab prints on stdout: ``Requests per second:``, the two
``Time per request:`` lines (mean per request, and mean across concurrent
requests), the ``Connection Times (ms)`` table and the ``Percentage of the
requests served within a certain time (ms)`` table.
"""

from __future__ import annotations

import re

from perfab.parsers._base import FIELD, NUM, Collector, DeclaredMetric as M, ParsedMetric, combined, last_match, need

OPTIONS: frozenset[str] = frozenset()

TOOL = "ab"

METRICS = (
    M("requests_per_s", "req/s", True, "'Requests per second': completed requests over the test time"),
    M("time_taken_s", "s", False, "'Time taken for tests': wall time of the whole run"),
    M("complete_requests", "count", None, "'Complete requests': requests that got a response"),
    M("failed_requests", "count", False, "'Failed requests': connect, receive, length and exception failures"),
    M("non_2xx_responses", "count", False, "'Non-2xx responses': answers outside 200-299"),
    M("keepalive_requests", "count", None, "'Keep-Alive requests': requests served on a kept-alive connection"),
    M("write_errors", "count", False, "'Write errors': failed request writes"),
    M("total_transferred_bytes", "bytes", None, "'Total transferred': bytes received, headers included"),
    M("transfer_rate_kbps", "KB/s", True, "'Transfer rate': KB (1024 B) received per second"),
    M("time_per_request_ms", "ms", False, "'Time per request ... (mean)': concurrency x time / requests"),
    M("time_per_request_all_ms", "ms", False, "'Time per request ... (mean, across all concurrent requests)'"),
    M("failed_{kind}", "count", False, "failed requests by kind: connect, receive, length, exceptions"),
    M("{phase}_mean_ms", "ms", False, "'Connection Times' mean of connect, processing, waiting or total"),
    M("{phase}_median_ms", "ms", False, "'Connection Times' median of connect, processing, waiting or total"),
    M("latency_p{N}_ms", "ms", False, "percentile N of the time to serve a request (the percentage table)"),
)

# printed label -> metric name
_FIELDS = {
    "Time taken for tests": "time_taken_s",
    "Complete requests": "complete_requests",
    "Failed requests": "failed_requests",
    "Non-2xx responses": "non_2xx_responses",
    "Keep-Alive requests": "keepalive_requests",
    "Write errors": "write_errors",
    "Total transferred": "total_transferred_bytes",
    "Transfer rate": "transfer_rate_kbps",
}


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from ab's summary; ParseError without a 'Requests per second' line."""
    text = combined(stdout, stderr)
    out = Collector(TOOL, METRICS)
    headline = need(rf"^Requests per second:[ \t]+({FIELD})", text, TOOL, "'Requests per second' line")
    out.add("requests_per_s", headline[1])
    out.table({rf"^{re.escape(label)}:[ \t]+({FIELD})": name for label, name in _FIELDS.items()}, text)
    per_request = re.findall(rf"^Time per request:\s+({NUM}) \[ms\] \(mean(, across .*)?\)", text, re.M)
    for value, across in per_request:
        out.add("time_per_request_all_ms" if across else "time_per_request_ms", value)
    breakdown = last_match(r"^[ \t]+\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", text)
    if breakdown:
        for i, kind in enumerate(("connect", "receive", "length", "exceptions"), start=1):
            out.add("failed_{kind}", breakdown[i], kind=kind)
    _connection_times(out, text)
    for pct, value in re.findall(rf"^[ \t]+(\d+)%\s+({NUM})", text, re.M):
        out.add("latency_p{N}_ms", value, N=pct)
    return out.metrics


def _connection_times(out: Collector, text: str) -> None:
    """Mean and median of each row of the 'Connection Times (ms)' table."""
    row = rf"^(Connect|Processing|Waiting|Total):\s+({NUM})\s+({NUM})\s+({NUM})\s+({NUM})\s+({NUM})"
    for phase, _min, mean, _sd, median, _max in re.findall(row, text, re.M):
        out.add("{phase}_mean_ms", mean, phase=phase)
        out.add("{phase}_median_ms", median, phase=phase)
