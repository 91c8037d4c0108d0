"""UnixBench parser. Written from github.com/kdlucas/byte-unixbench (UnixBench/Run); fixtures
are real output of that source built outside the repository (tests/data/unixbench/NOTE.md)."""

import pytest

from perfab.errors import UsageError
from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("unixbench")


def test_run_report(recorded):
    m = parse(*recorded("unixbench", "run_i1_c1_syscall_pipe_spawn"))
    assert m == {
        "pipe_throughput_lps": ParsedMetric(1129219.0, "lps", True),
        "process_creation_lps": ParsedMetric(913.2, "lps", True),
        "system_call_overhead_lps": ParsedMetric(1006098.9, "lps", True),
        "pipe_throughput_index": ParsedMetric(907.7, "index", True),
        "process_creation_index": ParsedMetric(72.5, "index", True),
        "system_call_overhead_index": ParsedMetric(670.7, "index", True),
        "index_score": ParsedMetric(353.4, "index", True),
    }


def test_run_report_with_two_copy_counts(recorded):
    stdout, stderr = recorded("unixbench", "run_i1_c1_syscall_pipe_spawn")
    second = stdout[stdout.index("Benchmark Run:"):].replace("running 1 parallel copy", "running 2 parallel copies")
    m = parse(stdout + "\n" + second.replace("353.4", "600.0"), stderr)
    assert m["index_score"].value == 353.4
    assert m["index_score_2copies"].value == 600.0
    assert m["pipe_throughput_lps_2copies"].value == 1129219.0


def test_count_line_alone(recorded):
    assert parse(*recorded("unixbench", "pgms_syscall_2")) == {"count": ParsedMetric(1590835.0, "count", True)}


def test_last_count_line_wins_like_run(recorded):
    assert parse(*recorded("unixbench", "pgms_context1_2"))["count"].value == 281817.0


def test_duration_option_gives_rate(recorded):
    m = get_parser("unixbench", {"duration_s": 2})(*recorded("unixbench", "pgms_dhry2reg_2"))
    assert m["rate_lps"] == ParsedMetric(134872170 / 2, "lps", True)


def test_timebase_zero_is_already_a_rate(recorded):
    stdout, stderr = recorded("unixbench", "pgms_fstime_write")
    assert stdout.startswith("Write done:")
    assert parse(stdout, stderr) == {"rate_kbps": ParsedMetric(990406.0, "KBps", True)}


def test_time_line_gives_rate():
    m = parse("", "COUNT|500|60|lpm\nTIME|30.0\n")
    assert m["rate_lpm"].value == pytest.approx(1000.0)


def test_bad_duration_option():
    with pytest.raises(UsageError, match="duration_s must be a positive number"):
        get_parser("unixbench", {"duration_s": -1})


def test_lmbench_output_is_not_unixbench(recorded):
    with pytest.raises(ParseError, match="UnixBench output has no 'COUNT|n|timebase|unit' line"):
        parse(*recorded("lmbench", "lat_pipe"))
