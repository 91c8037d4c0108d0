"""wrk: requests per second, transfer rate, latency statistics and percentiles.

wrk prints times with a unit suffix chosen per value (``us``, ``ms``, ``s``,
``m``, ``h``), byte counts in binary units (``KB`` = 1024 B) and request
rates with decimal suffixes (``k`` = 1000).  Everything is converted: times
to microseconds, bytes to MiB (named ``mb``).  ``--latency`` adds the
``Latency Distribution`` block (p50, p75, p90, p99).
"""

from __future__ import annotations

import re

from perfab.parsers._base import NUM, ParseError, ParsedMetric, combined, last_match, metric, need

OPTIONS: frozenset[str] = frozenset()

TOOL = "wrk"
_TIME_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}
_BYTES_MIB = {"B": 1 / 1024**2, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0, "TB": 1024.0**2}
_DECIMAL = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def _us(value: str, unit: str) -> float:
    return float(value) * _TIME_US[unit]


def parse(stdout: str, stderr: str, options: dict) -> dict[str, ParsedMetric]:
    """Metrics from wrk's report; ParseError without a 'Requests/sec' line."""
    text = combined(stdout, stderr)
    rps = need(rf"^Requests/sec:\s+({NUM})", text, TOOL, "'Requests/sec' line")
    out = {"requests_per_s": metric(rps[1], "req/s", True)}
    transfer = last_match(rf"^Transfer/sec:\s+({NUM})([KMGT]?B)", text)
    if transfer:
        out["transfer_mb_per_s"] = metric(float(transfer[1]) * _BYTES_MIB[transfer[2]], "MiB/s", True)
    total = last_match(rf"^\s+(\d+) requests in ({NUM})(\w+), ({NUM})([KMGT]?B) read", text)
    if total:
        out["requests"] = metric(total[1], "count", None)
        out["duration_s"] = metric(_us(total[2], total[3]) / 1e6, "s", None)
        out["read_mb"] = metric(float(total[4]) * _BYTES_MIB[total[5]], "MiB", None)
    out.update(_thread_stats(text))
    out.update(_distribution(text))
    out.update(_errors(text))
    return out


def _thread_stats(text: str) -> dict[str, ParsedMetric]:
    """The 'Latency' and 'Req/Sec' rows of the per-thread statistics."""
    out = {}
    lat = last_match(rf"^\s+Latency\s+({NUM})(\w+)\s+({NUM})(\w+)\s+({NUM})(\w+)", text)
    if lat:
        try:
            out["latency_avg_us"] = metric(_us(lat[1], lat[2]), "us", False)
            out["latency_stdev_us"] = metric(_us(lat[3], lat[4]), "us", False)
            out["latency_max_us"] = metric(_us(lat[5], lat[6]), "us", False)
        except KeyError as err:
            raise ParseError(f"wrk latency has unknown time unit {err}: expected us, ms, s, m or h") from None
    req = last_match(rf"^\s+Req/Sec\s+({NUM})([kMG]?)\s", text)
    if req:
        out["thread_requests_per_s"] = metric(float(req[1]) * _DECIMAL[req[2]], "req/s", True)
    return out


def _distribution(text: str) -> dict[str, ParsedMetric]:
    """``latency_p50_us`` ... from the ``--latency`` block."""
    out = {}
    block = last_match(r"^\s+Latency Distribution\n((?:\s+\d+(?:\.\d+)?%\s+\S+\n?)+)", text)
    if block:
        for pct, value, unit in re.findall(rf"(\d+(?:\.\d+)?)%\s+({NUM})(\w+)", block[1]):
            name = "latency_p" + pct.replace(".", "_") + "_us"
            out[name] = metric(_us(value, unit), "us", False)
    return out


def _errors(text: str) -> dict[str, ParsedMetric]:
    """Socket errors and non-2xx/3xx responses, reported only when non-zero."""
    out = {}
    non2xx = last_match(r"^\s+Non-2xx or 3xx responses:\s+(\d+)", text)
    if non2xx:
        out["non_2xx_3xx_responses"] = metric(non2xx[1], "count", False)
    errs = last_match(r"^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if errs:
        for i, kind in enumerate(("connect", "read", "write", "timeout"), start=1):
            out[f"socket_errors_{kind}"] = metric(errs[i], "count", False)
    return out
