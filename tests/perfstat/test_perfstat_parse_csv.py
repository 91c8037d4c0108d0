"""CSV (-x) parsing of real perf stat output, every mode, exact values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from perfab.run.backends.perfparse import PerfRow, parse_csv, parse_json, topdown_rows

DATA = Path(__file__).parent.parent / "data" / "perf"


def parse(name: str):
    return parse_csv((DATA / name).read_text())


def test_plain_software_events():
    out = parse("sw_csv.txt")
    assert out.messages == ()
    assert out.rows[0] == PerfRow(
        prefix=(), interval_s=None, value=10.12, status="ok", unit="msec", event="task-clock",
        run_time_ns=10122134, pct_running=100.0, variance_pct=None, metric_value=0.895,
        metric_unit="CPUs utilized",
    )  # fmt: skip
    assert [(r.event, r.value) for r in out.rows[1:]] == [
        ("context-switches", 3.0), ("page-faults", 3960.0), ("cpu-migrations", 0.0)
    ]
    assert out.rows[1].metric_unit == "/sec" and out.rows[1].unit == ""


def test_repeat_mode_variance_field():
    out = parse("sw_r5_csv.txt")
    assert [r.variance_pct for r in out.rows] == [6.41, 62.05, 0.01, 0.0, 0.0]
    assert out.rows[0].run_time_ns == 9975164 and out.rows[0].value == 9.98
    assert out.rows[4].status == "not supported" and out.rows[4].value is None
    assert out.rows[4].event == "cycles" and out.rows[4].metric_value is None


def test_interval_mode_space_padded_timestamp():
    out = parse("sw_interval_csv.txt")
    assert len(out.rows) == 40
    first, last = out.rows[0], out.rows[-1]
    assert first.interval_s == 0.101369412 and first.prefix == ()
    assert (first.value, first.unit, first.event) == (99.03, "msec", "task-clock")
    assert last.interval_s == 0.999376612 and last.event == "cpu-migrations" and last.value == 0.0
    assert out.rows[6].value == 9034.0 and out.rows[6].run_time_ns == 99258233


def test_interval_final_partial_interval_not_counted():
    out = parse("sw_interval_notcounted_csv.txt")
    tail = out.rows[-2:]
    assert [r.status for r in tail] == ["not counted", "not counted"]
    assert [r.value for r in tail] == [None, None]
    assert tail[0].interval_s == 0.308676918 and tail[0].unit == "msec" and tail[0].run_time_ns == 0
    assert tail[0].pct_running == 100.0 and tail[0].metric_value is None


@pytest.mark.parametrize(
    "name, prefixes, values",
    [
        ("sw_noaggr_csv.txt", [("CPU0",), ("CPU1",), ("CPU0",), ("CPU1",)], [201.81, 201.68, 997.0, 750.0]),
        ("sw_percore_csv.txt", [("S0-D0-C0", "1"), ("S0-D0-C0", "1"), ("S0-D0-C1", "1"), ("S0-D0-C1", "1")],
         [204.76, 509.0, 204.83, 5708.0]),
        ("sw_persocket_csv.txt", [("S0", "2"), ("S0", "2")], [405.89, 13364.0]),
        ("sw_perthread_csv.txt", [("work-7413",), ("work-7413",)], [199.84, 18454.0]),
    ],
)  # fmt: skip
def test_aggregation_prefixes(name, prefixes, values):
    out = parse(name)
    assert [r.prefix for r in out.rows] == prefixes
    assert [r.value for r in out.rows] == values
    assert all(r.interval_s is None for r in out.rows)


def test_tool_events_and_modifiers():
    out = parse("tool_events_csv.txt")
    assert {r.event: r.value for r in out.rows} == {
        "duration_time": 256182033.0, "user_time": 19956000.0, "system_time": 231500000.0, "task-clock": 241.11
    }
    share = parse("kernel_share_sw_csv.txt")
    assert [r.event for r in share.rows][:2] == ["task-clock:u", "task-clock:k"]
    assert share.rows[5].value == 39111.0 and share.rows[6].value == 3.0


def test_not_supported_hardware_and_group_error_messages():
    out = parse("hw_unsupported_csv.txt")
    assert [r.status for r in out.rows] == ["not supported"] * 5 + ["ok"]
    assert [r.event for r in out.rows][:5] == [
        "cycles:u", "cycles:k", "instructions:u", "instructions:k", "L1-icache-load-misses"
    ]
    group = parse("group_unsupported_csv.txt")
    assert group.rows == () and group.messages == ("Error:", "The cycles:u event is not supported.")


def test_multiplexed_row_and_metric_continuations():
    out = parse("public_power_persocket_multiplexed_csv.txt")
    cycles, insns, before_fix, after_fix = out.rows
    assert (cycles.prefix, cycles.value, cycles.pct_running) == (("S0", "1"), 189544.0, 67.0)
    assert cycles.run_time_ns == 1263158 and cycles.metric_unit == "GHz"
    assert insns.pct_running == 100.0 and insns.metric_value == 0.5
    for row, value in ((before_fix, 1.34), (after_fix, 1.81)):
        assert (row.prefix, row.event, row.value, row.metric_value) == (("S0", "1"), "", None, value)
        assert row.metric_unit == "stalled cycles per insn"
    assert len(out.counters()) == 2


def test_topdown_rows_from_spr_default_output():
    out = parse("public_spr_topdownl1_csv.txt")
    header = out.rows[2]
    assert (header.event, header.metric_unit, header.run_time_ns, header.pct_running) == (
        "", "TopdownL1", 225849327050, 100.0
    )
    tma = topdown_rows(out)
    assert tma == pytest.approx({"tma_backend_bound": 0.701, "tma_bad_speculation": 0.027,
                                 "tma_frontend_bound": 0.125, "tma_retiring": 0.146})  # fmt: skip


@pytest.mark.parametrize("name", ["topdownl1_nopmu.txt", "topdownl1_skx_events_unparsable_csv.txt"])
def test_topdown_fallback_to_default_events_is_detected(name):
    out = parse(name)
    assert topdown_rows(out) is None
    assert [r.event for r in out.counters()][:4] == ["task-clock", "context-switches", "cpu-migrations", "page-faults"]
    assert out.messages and ("TopdownL1" in out.messages[0] or "syntax error" in out.messages[0])


def test_separator_detection_and_both_formats():
    text = (DATA / "sw_csv.txt").read_text().replace(",", ";")
    assert [r.value for r in parse_csv(text).rows] == [10.12, 3.0, 3960.0, 0.0]
    assert parse_csv((DATA / "sw_csv.txt").read_text()).rows[2].value == 3960.0
    assert math.isnan(parse_json((DATA / "public_adl_hybrid_json.txt").read_text()).rows[2].metric_value)
