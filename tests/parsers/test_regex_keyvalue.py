"""The generic parsers: named regexes and ``name: number [unit]`` lines."""

import pytest

from perfab.errors import UsageError
from perfab.parsers import ParsedMetric, ParseError, get_parser


def test_keyvalue_on_the_bundled_demo(recorded):
    m = get_parser("keyvalue")(*recorded("keyvalue", "lockbench_inline_256sites"))
    assert m == {
        "checksum": ParsedMetric(float("14508187014339382782"), "", None),
        "ops/s": ParsedMetric(58974972.0, "ops/s", None),
    }
    outline = get_parser("keyvalue", {"only": ["ops/s"], "higher_is_better": {"ops/s": True}})(
        *recorded("keyvalue", "lockbench_outline_256sites"))
    assert outline == {"ops/s": ParsedMetric(61426101.0, "ops/s", True)}


def test_keyvalue_units_directions_and_overrides():
    text = "latency = 3.5 ms\nThroughput: 12 MB/s\nerrors: 0\nerrors: 2\nops/s: 7\n"
    options = {"higher_is_better": {"errors": False, "ops/s": True}, "units": {"errors": "count"}}
    m = get_parser("keyvalue", options)(text, "")
    assert m["latency"] == ParsedMetric(3.5, "ms", None)
    assert m["errors"] == ParsedMetric(2.0, "count", False)
    assert m["ops/s"] == ParsedMetric(7.0, "ops/s", True)


def test_keyvalue_guessed_higher_is_better_from_rate_and_throughput_names():
    # It used to call any name ending in "/s" or containing "throughput" higher-is-better.
    m = get_parser("keyvalue")("Throughput: 12 MB/s\ncache-misses/s: 40\n", "")
    assert m["Throughput"] == ParsedMetric(12.0, "MB/s", None)
    assert m["cache-misses/s"] == ParsedMetric(40.0, "cache-misses/s", None)


@pytest.mark.parametrize("options, message", [
    ({"units": {"x": 3}}, "units must be a table of metric name -> unit string"),
    ({"higher_is_better": {"x": "yes"}}, "higher_is_better must be a table of metric name -> true or false"),
])
def test_keyvalue_bad_option_values(options, message):
    with pytest.raises(UsageError, match=message):
        get_parser("keyvalue", options)


def test_keyvalue_missing_required_name(recorded):
    with pytest.raises(ParseError, match="output has no 'ops/s' line"):
        get_parser("keyvalue", {"only": ["ops/s"]})("checksum: 1\n", "")


def test_regex_groups(recorded):
    parser = get_parser("regex", {
        "patterns": {"tps": r"^tps = (?P<value>[\d.]+)", "lat": r"latency average = ([\d.]+) ms"},
        "units": {"tps": "tx/s", "lat": "ms"},
        "higher_is_better": {"tps": True, "lat": False},
    })
    m = parser(*recorded("pgbench", "tpcb_c2_t3s"))
    assert m == {"tps": ParsedMetric(299.006581, "tx/s", True), "lat": ParsedMetric(6.689, "ms", False)}


def test_regex_reads_stderr_and_takes_last_match(recorded):
    parser = get_parser("regex", {"patterns": {"completed": r"Completed (\d+) requests"}})
    assert parser(*recorded("ab", "nginx_n2000_c4"))["completed"] == ParsedMetric(2000.0, "", None)


def test_regex_thousands_separator():
    assert get_parser("regex", {"patterns": {"n": r"n=([\d,]+)"}})("n=1,234,567", "")["n"].value == 1234567.0


@pytest.mark.parametrize("options, message", [
    ({}, "needs option patterns"),
    ({"patterns": {"x": "(unclosed"}}, "does not compile"),
    ({"patterns": {"x": r"\d+"}}, "exactly one group"),
    ({"patterns": {"x": r"(\d+) (\d+)"}}, "exactly one group"),
    ({"patterns": {"x": r"(\d+)"}, "units": {"y": "s"}}, "metric 'y' that has no pattern"),
    ({"patterns": {"x": r"(\d+)"}, "higher_is_better": {"x": "yes"}}, "must map metric names"),
])
def test_regex_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        get_parser("regex", options)


def test_regex_capture_not_a_number():
    with pytest.raises(ParseError, match="captured 'abc', which is not a finite number"):
        get_parser("regex", {"patterns": {"x": r"x=(\w+)"}})("x=abc", "")
