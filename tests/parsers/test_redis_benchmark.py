"""redis-benchmark parser against recorded 7.0.15 runs (tests/data/redis-benchmark/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("redis-benchmark")


def test_csv(recorded):
    m = parse(*recorded("redis-benchmark", "csv_set_get_n10000"))
    assert m["set_requests_per_s"] == ParsedMetric(44247.79, "req/s", True)
    assert m["set_latency_avg_ms"] == ParsedMetric(0.156, "ms", False)
    assert m["set_latency_max_ms"].value == 9.183
    assert m["lpush_latency_p99_ms"].value == 0.255
    assert m["incr_latency_min_ms"].value == 0.024
    assert len(m) == 4 * 7


def test_csv_pipelined(recorded):
    m = parse(*recorded("redis-benchmark", "csv_pipeline16_ping_set"))
    assert m["ping_inline_requests_per_s"].value == 588235.25
    assert m["ping_mbulk_latency_p95_ms"].value == 1.487


def test_quiet_output_with_carriage_returns(recorded):
    m = parse(*recorded("redis-benchmark", "plain_q"))
    assert m == {
        "set_requests_per_s": ParsedMetric(56497.18, "req/s", True),
        "set_latency_p50_ms": ParsedMetric(0.567, "ms", False),
        "get_requests_per_s": ParsedMetric(48076.92, "req/s", True),
        "get_latency_p50_ms": ParsedMetric(0.583, "ms", False),
    }


def test_old_headerless_csv():
    # Constructed from redis 5's benchmark.c CSV format: "test","rps" rows only.
    m = parse('"PING_INLINE","98039.22"\n"MSET (10 keys)","45662.10"\n', "")
    assert m["mset_10_keys_requests_per_s"].value == 45662.10
    assert len(m) == 2


def test_pgbench_output_is_not_redis(recorded):
    with pytest.raises(ParseError, match="redis-benchmark output has no CSV row"):
        parse(*recorded("pgbench", "tpcb_c2_t3s"))
