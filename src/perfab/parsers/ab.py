"""ApacheBench (``ab``): throughput, per-request time, failures, latency percentiles.

Reads the summary ab prints on stdout: ``Requests per second:``, the two
``Time per request:`` lines (mean per request, and mean across concurrent
requests), the ``Connection Times (ms)`` table and the ``Percentage of the
requests served within a certain time (ms)`` table.
"""

from __future__ import annotations

import re

from perfab.parsers._base import NUM, ParsedMetric, combined, last_match, metric, need

OPTIONS: frozenset[str] = frozenset()

TOOL = "ab"

# printed label -> (metric name, unit, higher_is_better)
_FIELDS = {
    "Time taken for tests": ("time_taken_s", "s", False),
    "Complete requests": ("complete_requests", "count", None),
    "Failed requests": ("failed_requests", "count", False),
    "Non-2xx responses": ("non_2xx_responses", "count", False),
    "Keep-Alive requests": ("keepalive_requests", "count", None),
    "Write errors": ("write_errors", "count", False),
    "Total transferred": ("total_transferred_bytes", "bytes", None),
    "Transfer rate": ("transfer_rate_kbps", "KB/s", True),
}


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from ab's summary; ParseError without a 'Requests per second' line."""
    text = combined(stdout, stderr)
    rps = need(rf"^Requests per second:\s+({NUM})", text, TOOL, "'Requests per second' line")
    out = {"requests_per_s": metric(rps[1], "req/s", True)}
    for label, (name, unit, better) in _FIELDS.items():
        found = last_match(rf"^{re.escape(label)}:\s+({NUM})", text)
        if found:
            out[name] = metric(found[1], unit, better)
    per_request = re.findall(rf"^Time per request:\s+({NUM}) \[ms\] \(mean(, across .*)?\)", text, re.M)
    for value, across in per_request:
        name = "time_per_request_all_ms" if across else "time_per_request_ms"
        out[name] = metric(value, "ms", False)
    breakdown = last_match(r"^\s+\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", text)
    if breakdown:
        for i, kind in enumerate(("connect", "receive", "length", "exceptions"), start=1):
            out[f"failed_{kind}"] = metric(breakdown[i], "count", False)
    out.update(_connection_times(text))
    out.update(_percentiles(text))
    return out


def _connection_times(text: str) -> dict[str, ParsedMetric]:
    """Mean and median of each row of the 'Connection Times (ms)' table."""
    out = {}
    row = rf"^(Connect|Processing|Waiting|Total):\s+({NUM})\s+({NUM})\s+({NUM})\s+({NUM})\s+({NUM})"
    for name, _min, mean, _sd, median, _max in re.findall(row, text, re.M):
        out[f"{name.lower()}_mean_ms"] = metric(mean, "ms", False)
        out[f"{name.lower()}_median_ms"] = metric(median, "ms", False)
    return out


def _percentiles(text: str) -> dict[str, ParsedMetric]:
    """``latency_p50_ms`` ... ``latency_p100_ms`` from the percentage table."""
    out = {}
    for pct, value in re.findall(rf"^\s+(\d+)%\s+({NUM})", text, re.M):
        out[f"latency_p{pct}_ms"] = metric(value, "ms", False)
    return out
