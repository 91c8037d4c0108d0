"""will-it-scale parser. Written from github.com/antonblanchard/will-it-scale (main.c,
runtest.py); fixtures are real output of that source built outside the repository."""

import pytest

from perfab.errors import UsageError
from perfab.parsers import ParsedMetric, ParseError, get_parser

parse = get_parser("will-it-scale")


def test_average_line(recorded):
    assert parse(*recorded("will-it-scale", "getppid1_threads_t2_s2")) == {
        "ops_per_s": ParsedMetric(6343431.0, "ops/s", True),
    }


def test_per_task_with_tasks_option(recorded):
    m = get_parser("will-it-scale", {"tasks": 2})(*recorded("will-it-scale", "getppid1_threads_t2_s2"))
    assert m["per_task_ops_per_s"].value == 6343431 / 2
    m = get_parser("will-it-scale")(*recorded("will-it-scale", "futex1_processes_t1_s1"))
    assert m["ops_per_s"].value == 3698244.0


def test_runtest_csv(data_dir):
    text = (data_dir / "will-it-scale" / "runtest_getppid1.csv").read_text()
    m = parse(text, "")
    assert m["processes_1tasks_ops_per_s"].value == 5157346.0
    assert m["threads_2tasks_ops_per_s"] == ParsedMetric(8959507.0, "ops/s", True)
    assert m["processes_2tasks_idle_pct"] == ParsedMetric(0.05, "%", None)
    assert len(m) == 8


def test_warmup_only_output_has_no_average(recorded):
    stdout, _ = recorded("will-it-scale", "getppid1_threads_t2_s2")
    with pytest.raises(ParseError, match="was the test run with -s N"):
        parse(stdout.replace("average:", "avg?"), "")


@pytest.mark.parametrize("tasks", [0, "2", True])
def test_bad_tasks_option(tasks):
    with pytest.raises(UsageError, match="tasks must be a positive integer"):
        get_parser("will-it-scale", {"tasks": tasks})
