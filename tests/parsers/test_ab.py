"""ab parser against recorded ApacheBench runs (tests/data/ab/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("ab")


def test_nginx_run(recorded):
    m = parse(*recorded("ab", "nginx_n2000_c4"))
    assert m["requests_per_s"] == ParsedMetric(17510.37, "req/s", True)
    assert m["time_per_request_ms"] == ParsedMetric(0.228, "ms", False)
    assert m["time_per_request_all_ms"].value == 0.057
    assert m["complete_requests"] == ParsedMetric(2000.0, "count", None)
    assert m["failed_requests"] == ParsedMetric(0.0, "count", False)
    assert m["transfer_rate_kbps"] == ParsedMetric(4155.29, "KB/s", True)
    assert m["time_taken_s"].value == 0.114
    assert m["latency_p50_ms"].value == 0.0
    assert m["latency_p100_ms"].value == 1.0
    assert "non_2xx_responses" not in m


def test_failed_requests_and_breakdown(recorded):
    m = parse(*recorded("ab", "pyhttp_varlen_n300_c2"))
    assert m["failed_requests"].value == 200.0
    assert m["failed_length"] == ParsedMetric(200.0, "count", False)
    assert m["failed_connect"].value == 0.0
    assert m["requests_per_s"].value == 1740.97
    assert [m[f"latency_p{p}_ms"].value for p in (90, 98, 100)] == [2.0, 5.0, 18.0]
    assert m["total_mean_ms"].value == 1.0 and m["connect_median_ms"].value == 0.0


def test_keepalive_and_non_2xx(recorded):
    m = parse(*recorded("ab", "nginx_404_keepalive"))
    assert m["non_2xx_responses"] == ParsedMetric(500.0, "count", False)
    assert m["keepalive_requests"].value == 500.0
    assert m["requests_per_s"].value == 36919.44


def test_wrk_output_is_not_ab(recorded):
    with pytest.raises(ParseError, match="ab output has no 'Requests per second' line: is the workload really ab"):
        parse(*recorded("wrk", "nginx_t2_c8_d2s"))
