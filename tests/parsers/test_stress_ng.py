"""stress-ng parser against recorded 0.15.06 runs (tests/data/stress-ng/NOTE.md)."""

import pytest

from perfab.errors import UsageError
from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("stress-ng")


def test_metrics_brief(recorded):
    stdout, stderr = recorded("stress-ng", "cpu_metrics_brief")
    assert stdout == ""
    m = parse(stdout, stderr)
    assert m == {
        "cpu_bogo_ops": ParsedMetric(7533.0, "count", True),
        "cpu_real_s": ParsedMetric(2.00, "s", None),
        "cpu_usr_s": ParsedMetric(3.98, "s", None),
        "cpu_sys_s": ParsedMetric(0.00, "s", None),
        "cpu_bogo_ops_per_s": ParsedMetric(3762.57, "ops/s", True),
        "cpu_bogo_ops_per_cpu_s": ParsedMetric(1888.93, "ops/s", True),
    }


def test_full_metrics_with_misc_line(recorded):
    m = parse(*recorded("stress-ng", "cpu_switch_metrics"))
    assert m["switch_bogo_ops"].value == 394020.0
    assert m["switch_bogo_ops_per_s"].value == 195757.09
    assert m["switch_cpu_pct"] == ParsedMetric(83.37, "%", None)
    assert m["cpu_rss_max_kb"] == ParsedMetric(6472.0, "KB", False)
    assert m["switch_nanosecs_per_context_switch_pipe_method"] == ParsedMetric(5075.03, "nanosecs", False)


def test_text_misc_metrics(recorded):
    m = parse(*recorded("stress-ng", "cpu_matrix_yaml"))
    assert m["matrix_add_matrix_ops_per_s"] == ParsedMetric(545559.83, "ops/s", True)
    assert m["matrix_zero_matrix_ops_per_s"].value == 1572502.67
    assert m["matrix_bogo_ops"].value == 7626.0


def test_yaml_matches_text_of_the_same_run(recorded, data_dir):
    text = parse(*recorded("stress-ng", "cpu_matrix_yaml"))
    yaml_parse = get_parser("stress-ng", {"yaml_path": str(data_dir / "stress-ng" / "cpu_matrix.yaml")})
    m = yaml_parse("", "")
    assert m["cpu_bogo_ops_per_s"] == ParsedMetric(925.473743, "ops/s", True)
    assert m["matrix_cpu_pct"].value == 53.968487
    assert m["matrix_rss_max_kb"].value == 2768.0
    assert set(text) <= set(m)
    for name, metric in text.items():
        assert m[name].value == pytest.approx(metric.value, abs=0.01), name
        assert (m[name].unit, m[name].higher_is_better) == (metric.unit, metric.higher_is_better)


def test_missing_yaml_file(tmp_path):
    parser = get_parser("stress-ng", {"yaml_path": str(tmp_path / "none.yaml")})
    with pytest.raises(ParseError, match="cannot read stress-ng YAML .*none.yaml: FileNotFoundError"):
        parser("", "")


def test_yaml_without_metrics(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("---\nsystem-info:\n  cpus: 2\n")
    with pytest.raises(ParseError, match="has no 'metrics:' list"):
        get_parser("stress-ng", {"yaml_path": str(path)})("", "")


def test_bad_yaml_path_option():
    with pytest.raises(UsageError, match="yaml_path must be a file path string"):
        get_parser("stress-ng", {"yaml_path": 3})


def test_run_without_metrics_flag():
    stderr = "stress-ng: info:  [1] dispatching hogs: 2 cpu\nstress-ng: info:  [1] successful run completed in 2.00s\n"
    with pytest.raises(ParseError, match="run it with --metrics or --metrics-brief"):
        parse("", stderr)
