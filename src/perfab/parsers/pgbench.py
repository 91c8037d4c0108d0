"""PostgreSQL ``pgbench``: tps, latency, transactions, failures.

PostgreSQL 14+ prints ``tps = X (without initial connection time)``; older
releases print ``tps = X (including connections establishing)`` and ``tps =
Y (excluding connections establishing)``.  ``tps`` is always the figure that
leaves connection set-up out.
"""

from __future__ import annotations

from perfab.parsers._base import NUM, Collector, DeclaredMetric as M, ParsedMetric, combined, need

OPTIONS: frozenset[str] = frozenset()

TOOL = "pgbench"

METRICS = (
    M("tps", "tx/s", True, "'tps = X': transactions per second, connection set-up left out"),
    M("latency_avg_ms", "ms", False, "'latency average': mean transaction latency"),
    M("latency_stddev_ms", "ms", False, "'latency stddev' (printed with -r, --progress or a transaction count)"),
    M("initial_connection_ms", "ms", False, "'initial connection time' (PostgreSQL 14+)"),
    M("transactions", "count", None, "'number of transactions actually processed'"),
    M("failed_transactions", "count", False, "'number of failed transactions' (PostgreSQL 15+)"),
    M("skipped_transactions", "count", False, "'number of transactions skipped' (with --latency-limit)"),
    M("tps_including_connections", "tx/s", True, "before PostgreSQL 14: tps including connection set-up"),
)

_FIELDS = {
    rf"^latency average = ({NUM}) ms": "latency_avg_ms",
    rf"^latency stddev = ({NUM}) ms": "latency_stddev_ms",
    rf"^initial connection time = ({NUM}) ms": "initial_connection_ms",
    r"^number of transactions actually processed: (\d+)": "transactions",
    r"^number of failed transactions: (\d+)": "failed_transactions",
    r"^number of transactions skipped: (\d+)": "skipped_transactions",
    rf"^tps = ({NUM}) \(including connections establishing\)": "tps_including_connections",
}


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from pgbench's summary; ParseError without a 'tps =' line."""
    text = combined(stdout, stderr)
    out = Collector(TOOL, METRICS)
    tps = need(rf"^tps = ({NUM}) \((?:without initial connection time|excluding connections establishing)\)",
               text, TOOL, "'tps = ...' line")
    out.add("tps", tps[1])
    out.table(_FIELDS, text)
    return out.metrics
