"""wrk parser against recorded runs (tests/data/wrk/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("wrk")


def test_plain_run(recorded):
    m = parse(*recorded("wrk", "nginx_t2_c8_d2s"))
    assert m["requests_per_s"] == ParsedMetric(68680.24, "req/s", True)
    assert m["transfer_mb_per_s"] == ParsedMetric(16.24, "MiB/s", True)
    assert m["requests"] == ParsedMetric(137378.0, "count", None)
    assert m["duration_s"].value == 2.0
    assert m["latency_avg_us"] == ParsedMetric(125.79, "us", False)
    assert m["latency_max_us"].value == pytest.approx(4320.0)
    assert m["thread_requests_per_s"].value == pytest.approx(34550.0)
    assert not any(name.startswith("latency_p") for name in m)


def test_latency_distribution(recorded):
    m = parse(*recorded("wrk", "nginx_t2_c8_d2s_latency"))
    assert {k: v.value for k, v in m.items() if k.startswith("latency_p")} == {
        "latency_p50_us": 114.0, "latency_p75_us": 131.0, "latency_p90_us": 152.0, "latency_p99_us": 443.0,
    }
    assert m["duration_s"].value == pytest.approx(2.1)


def test_mixed_units_and_non_2xx(recorded):
    m = parse(*recorded("wrk", "nginx_404_t1_c4_d1s_latency"))
    assert m["latency_stdev_us"].value == pytest.approx(1310.0)
    assert m["latency_max_us"].value == pytest.approx(14720.0)
    assert m["latency_p90_us"].value == pytest.approx(1550.0)
    assert m["latency_p50_us"].value == 57.0
    assert m["non_2xx_3xx_responses"] == ParsedMetric(40283.0, "count", False)
    assert m["transfer_mb_per_s"].value == 11.82


def test_socket_errors_line():
    # Constructed from wrk's src/wrk.c format: a timeout-only failure run.
    text = ("  10 requests in 1.00s, 1.00KB read\n  Socket errors: connect 0, read 2, write 0, timeout 7\n"
            "Requests/sec:     10.00\nTransfer/sec:      1.00KB\n")
    m = parse(text, "")
    assert m["socket_errors_timeout"].value == 7.0 and m["socket_errors_read"].value == 2.0
    assert m["transfer_mb_per_s"].value == pytest.approx(1 / 1024)


def test_ab_output_is_not_wrk(recorded):
    with pytest.raises(ParseError, match="wrk output has no 'Requests/sec' line"):
        parse(*recorded("ab", "nginx_n2000_c4"))
