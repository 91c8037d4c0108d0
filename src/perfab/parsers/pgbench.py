"""PostgreSQL ``pgbench``: tps, latency, transactions, failures.

PostgreSQL 14+ prints ``tps = X (without initial connection time)``; older
releases print ``tps = X (including connections establishing)`` and ``tps =
Y (excluding connections establishing)``.  ``tps`` is always the figure that
leaves connection set-up out.
"""

from __future__ import annotations

from perfab.parsers._base import NUM, ParsedMetric, combined, metric, need, table_metrics

OPTIONS: frozenset[str] = frozenset()

TOOL = "pgbench"

_FIELDS = {
    rf"^latency average = ({NUM}) ms": ("latency_avg_ms", "ms", False),
    rf"^latency stddev = ({NUM}) ms": ("latency_stddev_ms", "ms", False),
    rf"^initial connection time = ({NUM}) ms": ("initial_connection_ms", "ms", False),
    r"^number of transactions actually processed: (\d+)": ("transactions", "count", None),
    r"^number of failed transactions: (\d+)": ("failed_transactions", "count", False),
    r"^number of transactions skipped: (\d+)": ("skipped_transactions", "count", False),
    rf"^tps = ({NUM}) \(including connections establishing\)": ("tps_including_connections", "tx/s", True),
}


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from pgbench's summary; ParseError without a 'tps =' line."""
    text = combined(stdout, stderr)
    tps = need(rf"^tps = ({NUM}) \((?:without initial connection time|excluding connections establishing)\)",
               text, TOOL, "'tps = ...' line")
    out = {"tps": metric(tps[1], "tx/s", True)}
    out.update(table_metrics(_FIELDS, text))
    return out
