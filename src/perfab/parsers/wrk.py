"""wrk: requests per second, transfer rate, latency statistics and percentiles.

wrk prints times with a unit suffix chosen per value (``us``, ``ms``, ``s``,
``m``, ``h``), byte counts in binary units (``KB`` = 1024 B) and request
rates with decimal suffixes (``k`` = 1000).  Everything is converted: times
to microseconds, bytes to MiB (named ``mb``).  ``--latency`` adds the
``Latency Distribution`` block (p50, p75, p90, p99).  A time with any other
suffix (``1.00sec``) is not wrk's and raises ParseError.
"""

from __future__ import annotations

import re

from perfab.parsers._base import FIELD, NUM, Collector, DeclaredMetric as M, ParseError, ParsedMetric
from perfab.parsers._base import combined, last_match, need

OPTIONS: frozenset[str] = frozenset()

TOOL = "wrk"

METRICS = (
    M("requests_per_s", "req/s", True, "'Requests/sec': completed requests over the run's duration"),
    M("transfer_mb_per_s", "MiB/s", True, "'Transfer/sec': bytes read per second, in MiB"),
    M("requests", "count", None, "'N requests in T': requests completed"),
    M("duration_s", "s", None, "'N requests in T': the run's duration"),
    M("read_mb", "MiB", None, "'..., X read': bytes read in total, in MiB"),
    M("latency_avg_us", "us", False, "Thread Stats 'Latency' average"),
    M("latency_stdev_us", "us", False, "Thread Stats 'Latency' standard deviation"),
    M("latency_max_us", "us", False, "Thread Stats 'Latency' maximum"),
    M("thread_requests_per_s", "req/s", True, "Thread Stats 'Req/Sec' average: requests per second per thread"),
    M("latency_p{N}_us", "us", False, "'Latency Distribution' (--latency): percentile N of the latency"),
    M("non_2xx_3xx_responses", "count", False, "'Non-2xx or 3xx responses' (printed only when non-zero)"),
    M("socket_errors_{kind}", "count", False, "'Socket errors': connect, read, write or timeout errors"),
)

_TIME_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}
_BYTES_MIB = {"B": 1 / 1024**2, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0, "TB": 1024.0**2}
_DECIMAL = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def _micros(unit: str) -> float:
    """Microseconds in one wrk time ``unit``; ParseError for a suffix wrk does not print."""
    if unit not in _TIME_US:
        raise ParseError(f"wrk time has unknown unit {unit[:20]!r}: expected us, ms, s, m or h")
    return _TIME_US[unit]


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from wrk's report; ParseError without a 'Requests/sec' line."""
    text = combined(stdout, stderr)
    out = Collector(TOOL, METRICS)
    out.add("requests_per_s", need(rf"^Requests/sec:[ \t]+({FIELD})", text, TOOL, "'Requests/sec' line")[1])
    if transfer := last_match(rf"^Transfer/sec:\s+({NUM})([KMGT]?B)", text):
        out.add("transfer_mb_per_s", transfer[1], scale=_BYTES_MIB[transfer[2]])
    if total := last_match(rf"^[ \t]+(\d+) requests in ({NUM})(\w+), ({NUM})([KMGT]?B) read", text):
        out.add("requests", total[1])
        out.add("duration_s", total[2], scale=_micros(total[3]) / 1e6)
        out.add("read_mb", total[4], scale=_BYTES_MIB[total[5]])
    _thread_stats(out, text)
    _distribution(out, text)
    _errors(out, text)
    return out.metrics


def _thread_stats(out: Collector, text: str) -> None:
    """The 'Latency' and 'Req/Sec' rows of the per-thread statistics."""
    if lat := last_match(rf"^[ \t]+Latency\s+({NUM})(\w+)\s+({NUM})(\w+)\s+({NUM})(\w+)", text):
        for i, stat in ((1, "avg"), (3, "stdev"), (5, "max")):
            out.add(f"latency_{stat}_us", lat[i], scale=_micros(lat[i + 1]))
    if req := last_match(rf"^[ \t]+Req/Sec\s+({NUM})([kMG]?)\s", text):
        out.add("thread_requests_per_s", req[1], scale=_DECIMAL[req[2]])


def _distribution(out: Collector, text: str) -> None:
    """``latency_p50_us`` ... from the ``--latency`` block."""
    if block := last_match(r"^[ \t]+Latency Distribution\n((?:[ \t]+\d+(?:\.\d+)?%[ \t]+\S+\n?)+)", text):
        for pct, value, unit in re.findall(rf"(\d+(?:\.\d+)?)%\s+({NUM})(\w+)", block[1]):
            out.add("latency_p{N}_us", value, scale=_micros(unit), N=pct)


def _errors(out: Collector, text: str) -> None:
    """Socket errors and non-2xx/3xx responses, reported only when non-zero."""
    if non2xx := last_match(r"^[ \t]+Non-2xx or 3xx responses:\s+(\d+)", text):
        out.add("non_2xx_3xx_responses", non2xx[1])
    if errs := last_match(r"^[ \t]+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text):
        for i, kind in enumerate(("connect", "read", "write", "timeout"), start=1):
            out.add("socket_errors_{kind}", errs[i], kind=kind)
