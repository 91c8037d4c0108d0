"""JSON (-j) parsing of real perf stat output, every mode, exact values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from perfab.run.backends.perfparse import PerfRow, parse_json, topdown_rows

DATA = Path(__file__).parent.parent / "data" / "perf"


def parse(name: str):
    return parse_json((DATA / name).read_text())


def test_plain_software_events_keep_six_decimals():
    out = parse("sw_json.txt")
    assert out.rows[0] == PerfRow(
        prefix=(), interval_s=None, value=12.866363, status="ok", unit="msec", event="task-clock",
        run_time_ns=12866363, pct_running=100.0, variance_pct=None, metric_value=0.674553,
        metric_unit="CPUs utilized",
    )  # fmt: skip
    assert [r.value for r in out.rows[1:]] == [1.0, 3959.0, 0.0]


def test_repeat_variance_key():
    out = parse("sw_r5_json.txt")
    assert [r.variance_pct for r in out.rows] == [0.19, 88.57, 0.01, 0.0]
    assert out.rows[2].value == 3960.0


def test_interval_key_and_not_counted_tail():
    out = parse("sw_interval_json.txt")
    assert [r.interval_s for r in out.rows[::2]] == [0.100183417, 0.200522765, 0.300903314, 0.321355614]
    assert out.rows[1].value == 46079.0 and out.rows[3].value == 45423.0
    assert [r.status for r in out.rows[-2:]] == ["not counted", "not counted"]
    assert out.rows[-1].value is None and out.rows[-1].run_time_ns == 0


@pytest.mark.parametrize(
    "name, prefixes, values",
    [
        ("sw_percore_json.txt", [("S0-D0-C0", "1"), ("S0-D0-C0", "1"), ("S0-D0-C1", "1"), ("S0-D0-C1", "1")],
         [201.578056, 25.0, 201.608435, 9.0]),
        ("sw_perthread_json.txt", [("work-7777",), ("work-7777",)], [201.614099, 93517.0]),
    ],
)  # fmt: skip
def test_aggregation_keys_become_prefix(name, prefixes, values):
    out = parse(name)
    assert [r.prefix for r in out.rows] == prefixes
    assert [r.value for r in out.rows] == values


def test_not_supported_rows():
    out = parse("hw_unsupported_json.txt")
    assert [(r.event, r.status) for r in out.rows] == [
        ("cycles:u", "not supported"), ("instructions:k", "not supported"),
        ("L1-icache-load-misses", "not supported"), ("task-clock", "ok"),
    ]  # fmt: skip
    assert out.rows[3].value == 9.75537 and out.rows[3].run_time_ns == 9755370


def test_hybrid_string_metrics_nan_and_metricgroup_header():
    out = parse("public_adl_hybrid_json.txt")
    atom, header, backend = out.rows
    assert (atom.event, atom.value, atom.pct_running, atom.metric_value) == (
        "cpu_atom/instructions/", 38790161.0, 63.0, 2.075951
    )
    assert (header.event, header.metric_unit, header.run_time_ns) == ("", "TopdownL1 (cpu_core)", 16061513607)
    assert backend.event == "" and math.isnan(backend.metric_value)
    assert backend.metric_unit == "% tma_backend_bound"
    assert len(out.counters()) == 1
    tma = topdown_rows(out)
    assert list(tma) == ["tma_backend_bound"] and math.isnan(tma["tma_backend_bound"])


def test_bare_nan_and_header_lines():
    text = '# started on x\n\n{"metric-value" : nan, "metric-unit" : "%  tma_retiring"}\nnot json\n'
    out = parse_json(text)
    assert math.isnan(out.rows[0].metric_value) and out.messages == ("not json",)


def test_vm_topdownl1_fallback_json():
    out = parse("vm_topdownl1.json")
    assert topdown_rows(out) is None
    assert [r.status for r in out.rows].count("not supported") == 4
