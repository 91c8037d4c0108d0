"""Each parser's METRICS declaration against what it produces on recorded output, and ``describe``."""

import importlib

import pytest
from parser_cases import CASES, DATA, REFUSED, recorded

from perfab.errors import UsageError
from perfab.parsers import _MODULES, DeclaredMetric, ParsedMetric, ParseError, ParserInfo, describe, get_parser
from perfab.parsers import known_parsers


def test_every_parser_has_a_case():
    assert {case.parser for case in CASES} == set(known_parsers())


def _check_declared(info: ParserInfo, options: dict, name: str, metric: ParsedMetric) -> None:
    """``name`` matches a declared entry with the metric's unit and direction (options may set either)."""
    entries = [entry for entry in info.metrics if entry.matches(name)]
    assert entries, f"{info.name} produced {name!r}, which no METRICS entry declares"
    unit_option = options.get("units", {}).get(name)
    better_option = options.get("higher_is_better", {}).get(name)
    agreeing = [
        entry for entry in entries
        if (unit_option or entry.unit) in (None, metric.unit)
        and (better_option if better_option is not None else entry.higher_is_better) == metric.higher_is_better
    ]  # fmt: skip
    assert agreeing, (f"{info.name} produced {name!r} as {metric.unit!r}, higher_is_better="
                      f"{metric.higher_is_better}; declared: {entries}")


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_recorded_metrics_match_the_declaration(case):
    info = describe(case.parser)
    parse = get_parser(case.parser, case.options)
    produced = 0
    for stem, stdout, stderr in recorded(case.directory):
        if (case.directory, stem) in REFUSED:
            with pytest.raises(ParseError):
                parse(stdout, stderr)
            continue
        for name, metric in parse(stdout, stderr).items():
            _check_declared(info, case.options, name, metric)
            produced += 1
    assert produced > 0


def test_stress_ng_yaml_metrics_match_the_declaration():
    options = {"yaml_path": str(DATA / "stress-ng" / "cpu_matrix.yaml")}
    metrics = get_parser("stress-ng", options)("", "")
    assert len(metrics) > 8
    for name, metric in metrics.items():
        _check_declared(describe("stress-ng"), options, name, metric)


def test_misc_time_metric_is_lower_is_better_by_declaration():
    stderr = ("stress-ng: metrc: [1] miscellaneous metrics:\n"
              "stress-ng: metrc: [1] clone  12.50 microsecs per clone (harmonic mean of 2 instances)\n"
              "stress-ng: metrc: [1] zombie  40.00 created zombies per stressor\n")
    m = get_parser("stress-ng")("", stderr)
    assert m["clone_microsecs_per_clone"] == ParsedMetric(12.5, "microsecs", False)
    assert m["zombie_created_zombies_per_stressor"] == ParsedMetric(40.0, "created", None)


@pytest.mark.parametrize("name", known_parsers())
def test_describe_lists_options_and_metrics(name):
    info = describe(name)
    assert info.name == name and info.summary and "\n" not in info.summary
    module = importlib.import_module(f"perfab.parsers.{_MODULES[name]}")
    assert info.options == tuple(sorted(module.OPTIONS)) and info.metrics == module.METRICS
    assert info.metrics and all(isinstance(entry, DeclaredMetric) for entry in info.metrics)
    for entry in info.metrics:
        assert entry.name and entry.meaning and "\n" not in entry.meaning
        assert entry.unit is None or isinstance(entry.unit, str)
        assert entry.higher_is_better in (True, False, None)
    assert len({entry.name for entry in info.metrics}) == len(info.metrics)


def test_describe_unknown_parser_is_usage_error():
    with pytest.raises(UsageError, match="unknown parser 'nope'"):
        describe("nope")


def test_declared_pattern_matching():
    entry = DeclaredMetric("latency_p{N}_ms", "ms", False, "percentile N")
    assert entry.matches("latency_p99_ms") and entry.matches("latency_p99_9_ms")
    assert not entry.matches("latency_p_ms") and not entry.matches("latency_p99_us")
    assert DeclaredMetric("tps", "tx/s", True, "rate").matches("tps")
    assert not DeclaredMetric("tps", "tx/s", True, "rate").matches("tps2")


def test_generic_parsers_declare_no_direction():
    for name in ("keyvalue", "regex"):
        assert [entry.higher_is_better for entry in describe(name).metrics] == [None]
