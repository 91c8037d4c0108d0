"""The parser registry: names, unknown names and options, garbage input."""

import pytest

from perfab.errors import PerfabError, UsageError
from perfab.parsers import ParsedMetric, ParseError, get_parser, known_parsers


def test_known_parsers_lists_every_tool():
    assert known_parsers() == [
        "ab", "db_bench", "gnu-time", "hackbench", "keyvalue", "lmbench", "perf-bench", "pgbench",
        "redis-benchmark", "regex", "stress-ng", "sysbench", "unixbench", "will-it-scale", "wrk",
    ]


def test_unknown_name_is_usage_error_listing_known_names():
    with pytest.raises(UsageError) as err:
        get_parser("abb")
    message = str(err.value)
    assert "'abb'" in message and "ab, db_bench" in message and "wrk" in message
    assert "\n" not in message


def test_unknown_option_is_usage_error():
    with pytest.raises(UsageError, match="parser 'ab' has no option 'yaml_path': it accepts none"):
        get_parser("ab", {"yaml_path": "x"})


def test_parse_error_is_a_perfab_error():
    assert issubclass(ParseError, PerfabError)
    assert not issubclass(ParseError, UsageError)


def test_parsed_metric_is_frozen():
    m = ParsedMetric(1.0, "s", False)
    with pytest.raises(AttributeError):
        m.value = 2.0  # type: ignore[misc]


GARBAGE = "\x00\ufffd\ufffd random words: not a benchmark\n<html>404</html>\n"


@pytest.mark.parametrize("name", [n for n in known_parsers() if n != "regex"])
def test_garbage_input_raises_one_line_parse_error(name):
    with pytest.raises(ParseError) as err:
        get_parser(name)(GARBAGE, GARBAGE)
    assert "\n" not in str(err.value) and str(err.value)


def test_regex_garbage_input_raises_parse_error():
    parser = get_parser("regex", {"patterns": {"rate": r"rate: (\d+)"}})
    with pytest.raises(ParseError, match="regex for metric 'rate' matched nothing"):
        parser(GARBAGE, GARBAGE)


def test_empty_output_raises_parse_error():
    for name in ("ab", "wrk", "sysbench", "keyvalue", "gnu-time"):
        with pytest.raises(ParseError):
            get_parser(name)("", "")
