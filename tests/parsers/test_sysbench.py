"""sysbench parser against recorded sysbench 1.0.20 runs (tests/data/sysbench/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("sysbench")


def test_cpu(recorded):
    m = parse(*recorded("sysbench", "cpu_t2_1s"))
    assert m["events_per_s"] == ParsedMetric(24531.57, "events/s", True)
    assert m["total_time_s"].value == 1.0002
    assert m["total_events"] == ParsedMetric(24561.0, "count", None)
    assert m["latency_avg_ms"] == ParsedMetric(0.08, "ms", False)
    assert m["latency_max_ms"].value == 2.07
    assert m["latency_p95_ms"].value == 0.08
    assert m["thread_events_avg"].value == 12280.5
    assert m["thread_events_stddev"].value == 40.5
    assert m["thread_exec_avg_s"].value == 0.9973


def test_cpu_with_histogram(recorded):
    m = parse(*recorded("sysbench", "cpu_percentile95_histogram"))
    assert m["events_per_s"].value == 4237.53
    assert m["latency_max_ms"].value == 14.57 and m["latency_p95_ms"].value == 0.25


def test_memory(recorded):
    m = parse(*recorded("sysbench", "memory_1s"))
    assert m["operations_per_s"] == ParsedMetric(6793619.34, "ops/s", True)
    assert m["transfer_mib_per_s"] == ParsedMetric(6634.39, "MiB/s", True)
    assert m["total_events"].value == 2097152.0


@pytest.mark.parametrize("name, events, seconds", [("threads_t2_1s", 3553, 1.0004), ("mutex_t2", 2, 0.0319)])
def test_rate_derived_when_not_printed(recorded, name, events, seconds):
    m = parse(*recorded("sysbench", name))
    assert m["events_per_s"].value == pytest.approx(events / seconds)
    assert m["total_events"].value == events


def test_oltp_lines():
    # Constructed from sysbench 1.0's oltp report format.
    text = ("    transactions:                        1200   (119.93 per sec.)\n"
            "    queries:                             24000  (2398.62 per sec.)\n"
            "    total time:                          10.0059s\n    total number of events:              1200\n")
    m = parse(text, "")
    assert m["transactions_per_s"].value == 119.93 and m["queries_per_s"].value == 2398.62


def test_hackbench_output_is_not_sysbench(recorded):
    with pytest.raises(ParseError, match="sysbench output has no 'total time:' line"):
        parse(*recorded("hackbench", "pipe_g2_l100"))
