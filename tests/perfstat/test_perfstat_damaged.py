"""Regression tests: damaged perf stat output that crashed the reader or passed a non-finite count.

Each input is a recorded file (tests/data/perf/) with one field damaged, or
the smallest line that showed the bug; each test is named after the bug.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from perfab.errors import PerfabError
from perfab.run.backends.perfparse import PerfStatParseError, parse_csv, parse_json
from perfab.run.backends.perfstat import OUTPUT_NAME, STDERR_NAME, PerfStatBackend

DATA = Path(__file__).parent.parent / "data" / "perf"


def damaged(name: str, old: str, new: str) -> str:
    text = (DATA / name).read_text()
    assert old in text, (name, old)
    return text.replace(old, new, 1)


def test_error_is_a_perfab_error():
    assert issubclass(PerfStatParseError, PerfabError)


def test_csv_header_with_fractional_run_time_raised_value_error():
    # ',run,pct,,,,Group' header test took '0.5' as the run time: int('0.5') raised ValueError.
    out = parse_csv("0.5,900,50.490,/sec\n")
    assert out.rows == () and out.messages == ("0.5,900,50.490,/sec",)


@pytest.mark.parametrize("old, new, field", [
    ("10.12,msec,task-clock", "1e400,msec,task-clock", "count '1e400'"),  # was value=inf
    ("10.12,msec,task-clock,10122134", "10.12,msec,task-clock,1e400", "run time '1e400'"),  # was OverflowError
    ("10122134,100.00", "10122134," + "9" * 400, "percent running '9999"),  # was pct_running=inf
    ("10122134,100.00", "10122134,nan", "percent running 'nan'"),  # was pct_running=nan
    ("100.00,0.895,CPUs", "100.00,1e400,CPUs", "metric value '1e400'"),  # was metric_value=inf
])  # fmt: skip
def test_csv_non_finite_field_was_inf_nan_or_overflow_error(old, new, field):
    text = damaged("sw_csv.txt", old, new)
    with pytest.raises(PerfStatParseError, match="has a row whose " + field) as err:
        parse_csv(text)
    assert "\n" not in str(err.value)


def test_csv_interval_of_400_digits_was_inf():
    text = damaged("sw_interval_csv.txt", "0.101369412", "9" * 400 + ".101369412")
    with pytest.raises(PerfStatParseError, match="interval"):
        parse_csv(text)


def test_csv_variance_of_400_digits_was_inf():
    text = damaged("sw_r5_csv.txt", "6.41%", "9" * 400 + "%")
    with pytest.raises(PerfStatParseError, match="variance"):
        parse_csv(text)


@pytest.mark.parametrize("old, new, field", [
    ('"counter-value" : "12.866363"', '"counter-value" : "1e400"', "counter-value '1e400'"),  # was value=inf
    ('"counter-value" : "12.866363"', '"counter-value" : 1e400', "counter-value 'inf'"),  # was value=inf
    ('"counter-value" : "12.866363"', '"counter-value" : NaN', "counter-value 'nan'"),  # was value=nan
    ('"counter-value" : "12.866363"', '"counter-value" : "nan"', "counter-value 'nan'"),  # was value=nan
    ('"event-runtime" : 12866363', '"event-runtime" : "1e400"', "event-runtime '1e400'"),  # was OverflowError
    ('"event-runtime" : 12866363', '"event-runtime" : 1' + "0" * 400, "event-runtime '1000"),  # was None, silently
    ('"pcnt-running" : 100.00', '"pcnt-running" : Infinity', "pcnt-running 'inf'"),  # was None, silently
    ('"metric-value" : 0.674553', '"metric-value" : 1e400', "metric-value 'inf'"),  # was metric_value=None
])  # fmt: skip
def test_json_non_finite_field_was_inf_nan_or_overflow_error(old, new, field):
    text = damaged("sw_json.txt", old, new)
    with pytest.raises(PerfStatParseError, match="has a row whose " + field):
        parse_json(text)


def test_json_interval_of_400_digits_was_inf():
    text = damaged("sw_interval_json.txt", '"interval" : 0.100183417', '"interval" : 1e400')
    with pytest.raises(PerfStatParseError, match="interval 'inf'"):
        parse_json(text)


@pytest.mark.parametrize("line", [
    '{"a": ' + "[" * 100_000 + "}",  # was RecursionError
    '{"event-runtime": ' + "9" * 5000 + "}",  # was ValueError: exceeds the limit for integer string conversion
    '{"interval": {}, "counter-value": "5", "event": "cycles"}',  # was TypeError: float() of a dict
    '{"interval": "soon", "counter-value": "5", "event": "cycles"}',
    '{"counter-value": [5], "event": "cycles"}',
    '{"counter-value": true, "event": "cycles"}',
])  # fmt: skip
def test_json_unreadable_line_raised_instead_of_becoming_a_message(line):
    out = parse_json(line + "\n" + (DATA / "sw_json.txt").read_text())
    assert out.messages == (line,)
    assert [r.event for r in out.rows] == ["task-clock", "context-switches", "page-faults", "cpu-migrations"]


def test_perf_nan_metric_value_is_still_nan_and_counts_stay_finite():
    out = parse_json((DATA / "public_adl_hybrid_json.txt").read_text())
    assert math.isnan(out.rows[2].metric_value)
    assert all(r.value is None or math.isfinite(r.value) for r in out.rows)


def test_separator_guess_does_not_hide_a_damaged_row():
    # With ',' damaged rows raise; guessing ';' (no counters) must not turn them into messages.
    text = damaged("sw_csv.txt", "10.12,msec,task-clock", "1e400,msec,task-clock")
    with pytest.raises(PerfStatParseError):
        parse_csv(text)
    assert [r.value for r in parse_csv(text.replace("1e400", "10.12").replace(",", ";")).rows][:2] == [10.12, 3.0]


def test_collect_fails_the_run_on_a_damaged_count(tmp_path):
    group = ("task-clock", "context-switches", "page-faults", "user_time", "system_time",
             "cycles", "instructions", "L1-icache-load-misses:u")  # as recorded in vm_group_u
    shutil.copy(DATA / "vm_group_u.json", tmp_path / OUTPUT_NAME)
    shutil.copy(DATA / "vm_group_u.stderr", tmp_path / STDERR_NAME)
    text = (tmp_path / OUTPUT_NAME).read_text()
    good = PerfStatBackend(list(group)).collect(tmp_path, group, 0)
    assert good.failure is None and good.metrics["page-faults"] == 49.0
    (tmp_path / OUTPUT_NAME).write_text(text.replace('"counter-value" : "49.000000"', '"counter-value" : "1e400"'))
    m = PerfStatBackend(list(group)).collect(tmp_path, group, 0)
    assert m.metrics == {} and "counter-value '1e400' is not a finite number" in m.failure
    assert "\n" not in m.failure
