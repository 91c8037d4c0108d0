"""PerfStatBackend.collect on recorded perf output (this VM and public PMU samples)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perfab.errors import UsageError
from perfab.run.backends.perfstat import OUTPUT_NAME, STDERR_NAME, PerfStatBackend

DATA = Path(__file__).parent.parent / "data" / "perf"
GROUP_U = ("task-clock", "context-switches", "page-faults", "user_time", "system_time",
           "cycles", "instructions", "L1-icache-load-misses:u")  # fmt: skip


def scratch_from(tmp_path: Path, name: str) -> tuple[Path, int]:
    """Lay out a recorded vm_* run as the runner would leave it; return (scratch, wait status)."""
    if (DATA / f"{name}.json").exists():
        shutil.copy(DATA / f"{name}.json", tmp_path / OUTPUT_NAME)
    shutil.copy(DATA / f"{name}.stderr", tmp_path / STDERR_NAME)
    return tmp_path, int((DATA / f"{name}.rc").read_text()) << 8


def test_wrap_argv():
    backend = PerfStatBackend(["cycles", "instructions"], perf="/usr/bin/perf")
    assert backend.wrap(["ab", "-n", "1"], Path("/s"), ("cycles", "instructions")) == [
        "/usr/bin/perf", "stat", "-j", "-o", "/s/perf.stat", "-e", "cycles,instructions,user_time,system_time",
        "--", "ab", "-n", "1",
    ]  # fmt: skip
    # no repeats
    assert "cycles,system_time,user_time" in backend.wrap([], Path("/s"), ("cycles", "system_time", "user_time"))


def test_groups_come_from_the_budget():
    seed = ["cycles", "instructions", "L1-icache-load-misses:u", "L1-icache-load-misses:k"]
    assert len(PerfStatBackend(seed, max_events_per_run=3).groups()) == 2
    assert PerfStatBackend(seed).groups() == (tuple(seed),)
    with pytest.raises(UsageError, match="needs counters"):
        PerfStatBackend([])


def test_rows_map_by_position_and_unsupported_are_excluded(tmp_path):
    scratch, status = scratch_from(tmp_path, "vm_group_u")
    m = PerfStatBackend(list(GROUP_U)).collect(scratch, GROUP_U, status)
    assert m.failure is None
    assert m.metrics == {"task-clock": 0.590606, "context-switches": 0.0, "page-faults": 49.0,
                         "user_time": 1517000.0, "system_time": 0.0}  # fmt: skip
    assert set(m.excluded) == {"cycles", "instructions", "L1-icache-load-misses:u"}
    assert m.excluded["L1-icache-load-misses:u"].startswith("<not supported>")
    assert any("system_time" in note and "zero" in note for note in m.notes)


def test_signal_death_hidden_behind_exit_0_is_a_failure(tmp_path):
    scratch, status = scratch_from(tmp_path, "vm_sigsegv")
    assert status == 0
    group = GROUP_U[:5]
    m = PerfStatBackend(list(group)).collect(scratch, group, status)
    assert m.failure is not None and "SIGSEGV" in m.failure
    assert m.metrics["page-faults"] == 63.0


@pytest.mark.parametrize(
    "name, group, expected",
    [
        ("vm_bad_syntax", ("cycles:zz",), "rejected its command line (exit 129): event syntax error"),
        ("vm_group_unsupported", ("cycles:u", "instructions:u"), "The cycles:u event is not supported."),
        ("vm_exec_failed", ("task-clock",), "could not start the workload (exit 255)"),
    ],
)
def test_perf_own_failures_become_one_line_messages(tmp_path, name, group, expected):
    scratch, status = scratch_from(tmp_path, name)
    m = PerfStatBackend(list(group)).collect(scratch, group, status)
    assert m.metrics == {} and expected in m.failure and "\n" not in m.failure


def test_workload_exit_code_is_not_a_backend_failure(tmp_path):
    scratch, status = scratch_from(tmp_path, "vm_exit3")
    m = PerfStatBackend(["task-clock"]).collect(scratch, ("task-clock",), status)
    assert m.failure is None and m.metrics == {"task-clock": 0.740272}  # the appended rusage times stay out


def test_lost_exit_status_is_a_failure(tmp_path):
    scratch, status = scratch_from(tmp_path, "vm_lost_status")  # sh -c 'exit 3' reported as exit 0
    group = ("task-clock", "user_time")
    m = PerfStatBackend(list(group)).collect(scratch, group, status)
    assert status == 0 and "lost the workload's exit status" in m.failure
    assert m.metrics == {"task-clock": 0.658499} and "user_time" in m.excluded


def rusage_rows() -> str:
    """The user_time/system_time rows of a real run here (wrap() always asks for them)."""
    return "".join(line + "\n" for line in (DATA / "vm_exit3.json").read_text().splitlines()[-2:])


def test_multiplexed_row_is_excluded(tmp_path):
    # the hybrid counter row (a real PMU's) followed by this VM's rusage rows
    hybrid = (DATA / "public_adl_hybrid_json.txt").read_text().splitlines()[0]
    (tmp_path / OUTPUT_NAME).write_text(hybrid + "\n" + rusage_rows())
    group = ("cpu_atom/instructions/",)
    m = PerfStatBackend(list(group)).collect(tmp_path, group, 0)
    assert m.metrics == {} and m.excluded[group[0]].startswith("multiplexed: the counter ran 63.00%")


def test_not_counted_hardware_row_is_excluded(tmp_path):
    shutil.copy(DATA / "sw_interval_json.txt", tmp_path / OUTPUT_NAME)
    text = (tmp_path / OUTPUT_NAME).read_text().splitlines()[-2:]  # the final <not counted> interval
    (tmp_path / OUTPUT_NAME).write_text("\n".join(text) + "\n" + rusage_rows())
    group = ("task-clock", "page-faults")
    m = PerfStatBackend(list(group)).collect(tmp_path, group, 0)
    assert m.metrics == {} and all(r.startswith("<not counted>") for r in m.excluded.values())


def test_row_count_or_name_mismatch_fails_loudly(tmp_path):
    shutil.copy(DATA / "vm_exit3.json", tmp_path / OUTPUT_NAME)
    m = PerfStatBackend(["task-clock", "page-faults"]).collect(tmp_path, ("task-clock", "page-faults"), 0)
    assert "3 counter rows for 4 events" in m.failure
    m = PerfStatBackend(["cpu-clock"]).collect(tmp_path, ("cpu-clock",), 0)
    assert "'task-clock' where 'cpu-clock' was expected" in m.failure


def test_perf_killed_by_signal_and_missing_output(tmp_path):
    backend = PerfStatBackend(["task-clock"])
    assert "killed by SIGKILL" in backend.collect(tmp_path, ("task-clock",), 9).failure
    assert "no output file (exit 0)" in backend.collect(tmp_path, ("task-clock",), 0).failure


def test_derived_metrics_from_raw_counts_in_collect(tmp_path):
    rows = [("cycles", "4681002302"), ("instructions", "9574476543"), ("L1-icache-load-misses", "198588165")]
    lines = [f'{{"counter-value" : "{v}.000000", "unit" : "", "event" : "{e}", "event-runtime" : 10,'
             f' "pcnt-running" : 100.00, "metric-value" : 2.05, "metric-unit" : "insn per cycle"}}'
             for e, v in rows]  # fmt: skip
    (tmp_path / OUTPUT_NAME).write_text("\n".join(lines) + "\n" + rusage_rows())
    group = ("cycles", "instructions", "L1-icache-load-misses:k")
    m = PerfStatBackend(list(group)).collect(tmp_path, group, 0)
    assert m.metrics["IPC"] == 9574476543 / 4681002302  # not perf's rounded 2.05
    assert m.metrics["L1i MPKI :k"] == pytest.approx(1000 * 198588165 / 9574476543)
    assert m.metrics["L1-icache-load-misses:k"] == 198588165.0


def test_metric_info_covers_counters_and_derived():
    info = PerfStatBackend(["task-clock", "cycles", "instructions", "L1-icache-load-misses:k"]).metric_info()
    assert info["task-clock"].unit == "msec" and info["IPC"].higher_is_better is True
    assert info["L1i MPKI :k"].higher_is_better is False and info["instructions"].higher_is_better is None
