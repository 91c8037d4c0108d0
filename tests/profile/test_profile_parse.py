"""parse_report on perf report output recorded on this VM (tests/data/profile/README)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from perfab.errors import ToolError
from perfab.profile import parse_report

DATA = Path(__file__).resolve().parent.parent / "data" / "profile"


def fixture(name: str) -> str:
    return (DATA / f"{name}.txt").read_text()


def header_samples(text: str) -> str:
    return re.search(r"^# Samples: (\S+)", text, re.M)[1]


def header_event_count(text: str) -> int:
    return int(re.search(r"^# Event count \(approx.\): (\d+)", text, re.M)[1])


def test_mixed_profile_reads_every_entry_and_the_event():
    text = fixture("mixed_cpu_clock")
    report = parse_report(text)
    assert report.event == "cpu-clock"
    assert len(report.entries) == 63
    assert sum(e.samples for e in report.entries) == int(header_samples(text)) == 489


@pytest.mark.parametrize("name", ["mixed_cpu_clock", "cycles_fallback", "shell_pipeline_callgraph"])
def test_the_entries_add_up_to_the_event_count_perf_reports(name):
    text = fixture(name)
    assert parse_report(text).total_period == header_event_count(text)


def test_shares_are_percent_of_period_and_agree_with_perfs_rounded_column():
    report = parse_report(fixture("mixed_cpu_clock"))
    shares = report.self_shares()
    assert math.isclose(sum(shares.values()), 100.0, abs_tol=1e-9)
    for entry in report.entries:
        key = f"self.cpu-clock:{entry.level}.{entry.symbol}"
        assert abs(shares[key] - entry.overhead_pct) <= 0.005 + 1e-9, key
    assert shares["self.cpu-clock:u.spin_user"] == pytest.approx(100 * 218218218 / 489489489)


def test_kernel_and_user_symbols_of_the_same_name_stay_apart():
    shares = parse_report(fixture("mixed_cpu_clock")).self_shares()
    kernel = shares["self.cpu-clock:k.read_zero"]
    user = shares["self.cpu-clock:u.read_zero"]
    assert kernel == pytest.approx(100 * 13013013 / 489489489)
    assert user == pytest.approx(100 * 5005005 / 489489489)
    assert {e.dso for e in parse_report(fixture("mixed_cpu_clock")).entries if e.symbol == "read_zero"} == {
        "[kernel.kallsyms]",
        "workload",
    }


def test_cycles_without_a_pmu_is_keyed_by_the_event_perf_fell_back_to():
    shares = parse_report(fixture("cycles_fallback")).self_shares()
    assert all(key.startswith("self.cpu-clock:") for key in shares)
    assert shares["self.cpu-clock:u.spin_user"] > 40


def test_unresolved_addresses_fold_into_their_shared_object():
    text = fixture("shell_pipeline_callgraph")
    report = parse_report(text)
    shares = report.self_shares()
    unresolved = [e for e in report.entries if e.symbol == "[md5sum]"]
    assert len(unresolved) > 100  # one report line per address
    assert not any("0x" in key for key in shares)
    md5 = sum(e.period for e in unresolved) / report.total_period * 100
    assert shares["self.cpu-clock:u.[md5sum]"] == pytest.approx(md5)
    assert header_samples(text) == "4K" and sum(e.samples for e in report.entries) == 4627


def test_suffixed_kernel_symbols_are_kept_verbatim():
    shares = parse_report(fixture("shell_pipeline_callgraph")).self_shares()
    assert "self.cpu-clock:k.finish_task_switch.isra.0" in shares


def test_a_report_without_samples_names_the_fix():
    with pytest.raises(ToolError, match="no samples; run the workload longer"):
        parse_report(fixture("no_samples"), where="empty.data")


def test_an_unknown_line_is_a_one_line_tool_error():
    original = fixture("mixed_cpu_clock")
    text = re.sub(r"^( [\d.]+)%", r"\1", original, count=1, flags=re.M)  # drop one "%"
    assert text != original
    with pytest.raises(ToolError, match=r"^perf report: line \d+ is not a perf report entry"):
        parse_report(text)


def test_two_events_in_one_report_are_refused():
    text = fixture("mixed_cpu_clock")
    twice = text + text.replace("of event 'cpu-clock'", "of event 'task-clock'")
    with pytest.raises(ToolError, match="2 events .*record one event"):
        parse_report(twice)
