"""hackbench parser against recorded rt-tests 2.4 runs (tests/data/hackbench/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("hackbench")


@pytest.mark.parametrize("name, seconds", [
    ("pipe_g2_l100", 0.036), ("threads_g2_l100", 0.098), ("socket_g1_f5_l50", 0.002),
])
def test_time(recorded, name, seconds):
    assert parse(*recorded("hackbench", name)) == {"time_s": ParsedMetric(seconds, "s", False)}


def test_perf_bench_messaging_is_not_hackbench(recorded):
    with pytest.raises(ParseError, match="hackbench output has no 'Time: <seconds>' line"):
        parse(*recorded("perf-bench", "sched_messaging"))
