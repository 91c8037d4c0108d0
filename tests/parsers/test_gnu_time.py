"""GNU time parser against recorded time 1.9 runs (tests/data/gnu-time/NOTE.md)."""

import pytest

from perfab.parsers import ParsedMetric, ParseError, get_parser
from perfab.parsers.gnu_time import elapsed_seconds

parse = get_parser("gnu-time")


def test_default_format(recorded):
    m = parse(*recorded("gnu-time", "default_python_sum"))
    assert m == {
        "user_s": ParsedMetric(0.14, "s", False),
        "system_s": ParsedMetric(0.04, "s", False),
        "elapsed_s": ParsedMetric(0.51, "s", False),
        "max_rss_kb": ParsedMetric(13400.0, "KB", False),
        "fs_inputs": ParsedMetric(0.0, "count", None),
        "fs_outputs": ParsedMetric(0.0, "count", None),
        "major_page_faults": ParsedMetric(0.0, "count", False),
        "minor_page_faults": ParsedMetric(9473.0, "count", False),
        "swaps": ParsedMetric(0.0, "count", False),
        "cpu_pct": ParsedMetric(35.0, "%", None),
    }


def test_default_format_non_zero_exit(recorded):
    stdout, stderr = recorded("gnu-time", "default_exit3")
    assert stdout == "hi\n"
    m = parse(stdout, stderr)
    assert m["exit_status"].value == 3.0 and m["max_rss_kb"].value == 1604.0


def test_verbose(recorded):
    m = parse(*recorded("gnu-time", "verbose_dd_sleep"))
    assert m["elapsed_s"] == ParsedMetric(0.21, "s", False)
    assert m["cpu_pct"].value == 2.0
    assert m["max_rss_kb"].value == 2804.0
    assert m["major_page_faults"].value == 1.0 and m["minor_page_faults"].value == 500.0
    assert m["voluntary_context_switches"].value == 16.0
    assert m["involuntary_context_switches"].value == 1.0
    assert m["fs_inputs"].value == 224.0 and m["exit_status"].value == 0.0


def test_verbose_after_workload_stderr_and_signal(recorded):
    m = parse(*recorded("gnu-time", "verbose_signal"))
    assert m["signal"].value == 15.0
    assert m["minor_page_faults"].value == 166.0 and m["elapsed_s"].value == 0.1


@pytest.mark.parametrize("text, seconds", [("0:00.51", 0.51), ("2:03.25", 123.25), ("1:02:03", 3723.0)])
def test_elapsed_forms(text, seconds):
    assert elapsed_seconds(text) == pytest.approx(seconds)


def test_report_only_on_stdout_is_not_read(recorded):
    _, stderr = recorded("gnu-time", "default_python_sum")
    with pytest.raises(ParseError, match="wrapped in /usr/bin/time"):
        parse(stderr, "")
