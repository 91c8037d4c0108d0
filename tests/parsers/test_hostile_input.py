"""Regression tests: output that crashed a parser or passed a non-finite number now raises ParseError.

Each test is named after the bug it pins; the inputs are recorded fixtures
with one field damaged, or the smallest line of the tool's format that
showed the bug.
"""

import math
import time

import pytest
from parser_cases import CASES, DATA, recorded

from perfab.parsers import ParseError, get_parser
from perfab.parsers._base import number

# parser -> (fixture directory, fixture, text of its headline number, the metric it gives)
HEADLINE = {
    "ab": ("ab", "nginx_n2000_c4", "17510.37", "requests_per_s"),
    "wrk": ("wrk", "nginx_t2_c8_d2s", "68680.24", "requests_per_s"),
    "db_bench": ("db_bench", "fillseq_readrandom_overwrite_readseq_num20000", "276220", "fillseq_ops_per_s"),
    "perf-bench": ("perf-bench", "sched_pipe", "26062", "sched_pipe_ops_per_s"),
    "hackbench": ("hackbench", "pipe_g2_l100", "0.036", "time_s"),
    "sysbench": ("sysbench", "cpu_t2_1s", "24531.57", "events_per_s"),
    "stress-ng": ("stress-ng", "cpu_metrics_brief", "3762.57", "cpu_bogo_ops_per_s"),
    "redis-benchmark": ("redis-benchmark", "csv_set_get_n10000", "44247.79", "set_requests_per_s"),
    "pgbench": ("pgbench", "tpcb_c2_t3s", "299.006581", "tps"),
    "gnu-time": ("gnu-time", "default_python_sum", "0.14", "user_s"),
    "lmbench": ("lmbench", "lat_syscall_null", "0.1407", "simple_syscall_us"),
    "unixbench": ("unixbench", "pgms_syscall_2", "1590835", "count"),
    "will-it-scale": ("will-it-scale", "getppid1_threads_t2_s2", "6343431", "ops_per_s"),
    "keyvalue": ("keyvalue", "lockbench_inline_256sites", "58974972", "ops/s"),
    "regex": ("pgbench", "tpcb_c2_t3s", "299.006581", "tps"),
}


def _case(parser: str):
    return next(case for case in CASES if case.parser == parser)


def _damaged(directory: str, stem: str, old: str, new: str) -> tuple[str, str]:
    """The recorded run with the first ``old`` (in the stream holding it) replaced by ``new``."""
    _, stdout, stderr = next(run for run in recorded(directory) if run[0] == stem)
    if old in stdout:
        return stdout.replace(old, new, 1), stderr
    assert old in stderr, (stem, old)
    return stdout, stderr.replace(old, new, 1)


def test_headline_table_covers_every_parser():
    assert set(HEADLINE) == {case.parser for case in CASES}


@pytest.mark.parametrize("parser", sorted(HEADLINE))
def test_recorded_headline_number_is_read(parser):
    directory, stem, _, name = HEADLINE[parser]
    _, stdout, stderr = next(run for run in recorded(directory) if run[0] == stem)
    assert math.isfinite(get_parser(parser, _case(parser).options)(stdout, stderr)[name].value)


@pytest.mark.parametrize("bad", ["1e400", "-1e400", "9" * 400])
@pytest.mark.parametrize("parser", sorted(HEADLINE))
def test_non_finite_number_was_accepted_as_inf(parser, bad):
    # Before: 14 of 15 parsers returned inf (a '+nan%' report row, 'Infinity' in JSON).
    directory, stem, old, name = HEADLINE[parser]
    stdout, stderr = _damaged(directory, stem, old, bad)
    integer_only = parser == "will-it-scale" and not bad.isdigit()  # 'average:' takes digits only
    with pytest.raises(ParseError, match="has no 'average:' line" if integer_only else "not a finite number") as err:
        get_parser(parser, _case(parser).options)(stdout, stderr)
    assert "\n" not in str(err.value)


def test_number_rejects_every_non_finite_form():
    for text in ("nan", "-nan", "NaN", "inf", "-Infinity", "1e400", "", "0.5x", " ", True, None, 10**400):
        with pytest.raises(ParseError, match="not a finite number"):
            number(text, "x")
    assert number("-0", "x") == 0.0 and number("1e-400", "x") == 0.0 and number(3, "x") == 3.0
    with pytest.raises(ParseError, match="x reads '1e300', which overflows when converted"):
        number("1e300", "x", scale=1e300)


def test_regex_capture_nan_reached_the_database():
    # Before: ParsedMetric(nan) was stored, and the NOT NULL value column aborted the session (IntegrityError).
    parser = get_parser("regex", {"patterns": {"x": r"x=(\S+)"}})
    for bad in ("nan", "-nan", "inf", "1e400"):
        with pytest.raises(ParseError, match=rf"regex for metric 'x' captured '{bad}', which is not a finite"):
            parser(f"x={bad}\n", "")


def test_wrk_seconds_unit_sec_raised_key_error():
    # Before: 'sec' in the Latency Distribution or the 'requests in' line raised KeyError('sec').
    thread = "    Latency     1.00sec  2.00ms  3.00ms   50%\n"
    dist = "  Latency Distribution\n     50%  1.00sec\n"
    total = "  10 requests in 1.00sec, 1.00KB read\n"
    for text in (thread, dist, total):
        with pytest.raises(ParseError, match="wrk time has unknown unit 'sec'"):
            get_parser("wrk")(text + "Requests/sec: 10\n", "")


@pytest.mark.parametrize("row", ["1,,,,,", "1,2", "x1,2,3,4,5,6", "1,5157346,8.35,4821979,12.56"])
def test_will_it_scale_csv_empty_or_missing_fields_raised_value_or_type_error(data_dir, row):
    text = (data_dir / "will-it-scale" / "runtest_getppid1.csv").read_text() + row + "\n"
    with pytest.raises(ParseError, match="will-it-scale"):
        get_parser("will-it-scale")(text, "")


def test_will_it_scale_5000_digit_average_raised_value_error():
    with pytest.raises(ParseError, match="will-it-scale metric 'ops_per_s' reads"):
        get_parser("will-it-scale", {"tasks": 2})("average:" + "9" * 5000 + "\n", "")


def test_redis_benchmark_csv_value_with_suffix_raised_value_error():
    stdout, stderr = _damaged("redis-benchmark", "csv_set_get_n10000", '"0.156"', '"0.5x"')
    with pytest.raises(ParseError, match=r"redis-benchmark metric 'set_latency_avg_ms' reads '0.5x'"):
        get_parser("redis-benchmark")(stdout, stderr)


def test_redis_benchmark_csv_field_over_the_csv_limit_raised_csv_error():
    with pytest.raises(ParseError, match="redis-benchmark CSV cannot be read"):
        get_parser("redis-benchmark")('"SET","' + "1" * 200_000 + "\n", "")


def test_lmbench_lat_ctx_process_count_1e400_raised_overflow_error():
    with pytest.raises(ParseError, match="lat_ctx process count reads '1e400'"):
        get_parser("lmbench")('"size=0k ovr=0.75\n1e400 1.72\n', "")
    with pytest.raises(ParseError, match="does not start with a process count"):
        get_parser("lmbench")('"size=0k ovr=0.75\n2.5 1.72\n', "")


def test_gnu_time_malformed_elapsed_raised_value_error():
    stdout, stderr = _damaged("gnu-time", "verbose_dd_sleep", "m:ss): 0:00.21", "m:ss): 1.2.3")
    with pytest.raises(ParseError, match=r"GNU time elapsed time '1.2.3' is not \[h:\]m:ss.cc"):
        get_parser("gnu-time")(stdout, stderr)


def test_unixbench_5000_digit_timebase_raised_value_error():
    with pytest.raises(ParseError, match="UnixBench COUNT timebase reads"):
        get_parser("unixbench")("", "COUNT|5|" + "9" * 5000 + "|lps\nTIME|2\n")


def test_unixbench_rate_over_a_vanishing_time_raised_zero_division_error():
    with pytest.raises(ParseError, match="UnixBench metric 'rate_lps' comes to inf"):
        get_parser("unixbench")("", "COUNT|5|1" + "0" * 300 + "|lps\nTIME|1e-300\n")


def test_sysbench_derived_rate_overflow_was_inf():
    text = "    total time:                          1e-320s\n    total number of events:              1e300\n"
    with pytest.raises(ParseError, match="sysbench metric 'events_per_s' comes to inf"):
        get_parser("sysbench")(text, "")


def test_db_bench_benchmark_name_without_letters_gave_a_nameless_metric():
    # Before: '_ : 1 micros/op 2 ops/sec' gave metrics called '_us_per_op' and '_ops_per_s'.
    with pytest.raises(ParseError, match="db_bench output names a result '_' that has no letters or digits"):
        get_parser("db_bench")("_ : 1.0 micros/op 2 ops/sec;\n", "")


@pytest.mark.parametrize("doc, message", [
    ("metrics:\n  - just a string\n", "has no 'metrics:' list of stressors"),  # was AttributeError
    ("metrics:\n  - stressor: cpu\n    bogo-ops: 2026-13-45\n", "cannot read stress-ng YAML .*: ValueError"),
    ("metrics:\n  - stressor: cpu\n    bogo-ops: " + "9" * 400 + "\n", "'cpu_bogo_ops' comes to"),  # OverflowError
    ("metrics:\n  - stressor: cpu\n    bogo-ops: .inf\n", "metric 'cpu_bogo_ops' comes to inf"),  # was inf
    ("metrics:\n  - stressor: cpu\n    bogo-ops: .nan\n", "metric 'cpu_bogo_ops' comes to nan"),  # was nan
    ("metrics:\n  - stressor: ''\n    bogo-ops: 5\n", "names a result '' that has no letters"),
])  # fmt: skip
def test_stress_ng_yaml_damage_raised_other_errors_or_passed_inf(tmp_path, doc, message):
    path = tmp_path / "damaged.yaml"
    path.write_text(doc)
    with pytest.raises(ParseError, match=message):
        get_parser("stress-ng", {"yaml_path": str(path)})("", "")


def test_stress_ng_yaml_of_the_recorded_run_still_reads():
    m = get_parser("stress-ng", {"yaml_path": str(DATA / "stress-ng" / "cpu_matrix.yaml")})("", "")
    assert all(math.isfinite(metric.value) for metric in m.values()) and len(m) > 8


@pytest.mark.parametrize("parser, stdout, stderr", [
    ("gnu-time", "", "x " + "1" * 20_000 + " y\n"),  # unanchored default-format search: 30 s
    ("keyvalue", "Pipe" + " " * 20_000 + "x\n", ""),  # lazy name before whitespace: 9 s
    ("sysbench", "\n" * 20_000, ""),  # '^\s+' ran across every following blank line: 4.5 s
    ("unixbench", "2 CPUs in system; running 1 parallel copy of tests\nPipe" + " " * 20_000 + "x\n", ""),  # 80 s
])  # fmt: skip
def test_long_runs_of_one_character_took_quadratic_time(parser, stdout, stderr):
    start = time.perf_counter()
    with pytest.raises(ParseError):
        get_parser(parser)(stdout, stderr)
    assert time.perf_counter() - start < 2.0  # linear now: milliseconds; before: the seconds noted above
