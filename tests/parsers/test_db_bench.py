"""db_bench parser against recorded RocksDB 7.8.3 runs (tests/data/db_bench/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("db_bench")


def test_four_benchmarks(recorded):
    m = parse(*recorded("db_bench", "fillseq_readrandom_overwrite_readseq_num20000"))
    assert m["fillseq_ops_per_s"] == ParsedMetric(276220.0, "ops/s", True)
    assert m["fillseq_us_per_op"] == ParsedMetric(3.616, "us", False)
    assert m["fillseq_mb_per_s"] == ParsedMetric(30.6, "MB/s", True)
    assert m["fillseq_elapsed_s"].value == 0.072
    assert m["readrandom_ops_per_s"].value == 718003.0
    assert m["overwrite_us_per_op"].value == 4.654
    assert m["readseq_mb_per_s"].value == 390.4
    assert len(m) == 16


def test_histogram_percentiles_follow_their_benchmark(recorded):
    m = parse(*recorded("db_bench", "fillrandom_readrandom_histogram_num10000"))
    assert m["fillrandom_p99_us"] == ParsedMetric(10.89, "us", False)
    assert m["fillrandom_p99_99_us"].value == 170.0
    assert m["readrandom_p50_us"].value == 0.59
    assert m["readrandom_p99_9_us"].value == 4.0
    assert m["readrandom_ops_per_s"].value == 929195.0


def test_older_line_without_seconds():
    m = parse("fillseq      :       2.000 micros/op 500000 ops/sec;   55.3 MB/s\n", "")
    assert m["fillseq_ops_per_s"].value == 500000.0 and m["fillseq_mb_per_s"].value == 55.3
    assert "fillseq_elapsed_s" not in m


def test_stderr_progress_alone_is_not_enough(recorded):
    _, stderr = recorded("db_bench", "fillseq_readrandom_overwrite_readseq_num20000")
    with pytest.raises(ParseError, match="db_bench output has no"):
        parse("", stderr)
