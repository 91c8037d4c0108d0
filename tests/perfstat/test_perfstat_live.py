"""Live: the backend's own argv run under the real perf on this machine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from perfab.run.backends.perfprobe import describe_counters, probe_counter_budget
from perfab.run.backends.perfscreen import NO_TOPDOWN, ScreenResult, rank, screen_command
from perfab.run.backends.perfstat import STDERR_NAME, PerfStatBackend

pytestmark = pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
SOFTWARE = ["task-clock", "context-switches", "page-faults", "user_time", "system_time"]


def run_like_the_runner(backend: PerfStatBackend, argv: list[str], scratch: Path, group) -> int:
    """Execute wrap() with LC_ALL=C, stderr saved in the scratch dir; return the wait4 status."""
    with open(scratch / STDERR_NAME, "w") as stderr:
        proc = subprocess.Popen(backend.wrap(argv, scratch, group), stdout=subprocess.DEVNULL,
                                stderr=stderr, env={**os.environ, "LC_ALL": "C"})  # fmt: skip
        _, status, _ = os.wait4(proc.pid, 0)
    return status


def wait_for_child(pid: int, timeout_s: float = 10.0) -> None:
    """Wait until perf has forked its workload (its signal handlers are set by then)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    deadline = time.monotonic() + timeout_s
    while not children.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)


def pmu_counts_cycles() -> bool:
    done = subprocess.run(["perf", "stat", "-x", ";", "-e", "cycles", "true"], capture_output=True, text=True)
    return "<not supported>" not in done.stderr and done.returncode == 0


def test_software_events_on_a_short_command(tmp_path):
    backend = PerfStatBackend(SOFTWARE)
    group = backend.groups()[0]
    argv = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64k", "count=20000"]
    m = backend.collect(tmp_path, group, run_like_the_runner(backend, argv, tmp_path, group))
    assert m.failure is None and m.excluded == {}
    assert set(m.metrics) == set(SOFTWARE)
    assert 0 < m.metrics["task-clock"] < 5000  # msec
    assert m.metrics["page-faults"] >= 10
    assert m.metrics["user_time"] + m.metrics["system_time"] > 0


def test_cycles_is_not_supported_without_a_pmu(tmp_path):
    if pmu_counts_cycles():
        pytest.skip("this machine has a hardware PMU")
    backend = PerfStatBackend(["task-clock", "cycles", "instructions"])
    group = backend.groups()[0]
    m = backend.collect(tmp_path, group, run_like_the_runner(backend, ["/bin/true"], tmp_path, group))
    assert m.failure is None and set(m.excluded) == {"cycles", "instructions"}
    assert m.excluded["cycles"].startswith("<not supported>") and "IPC" not in m.metrics
    assert m.metrics["task-clock"] > 0


@pytest.mark.parametrize("sig", ["SEGV", "KILL", "TERM"])
def test_workload_killed_by_a_signal_fails_the_run(tmp_path, sig):
    backend = PerfStatBackend(SOFTWARE)
    group = backend.groups()[0]
    status = run_like_the_runner(backend, ["sh", "-c", f"kill -{sig} $$"], tmp_path, group)
    assert os.waitstatus_to_exitcode(status) == 0  # perf hides the signal
    m = backend.collect(tmp_path, group, status)
    # perf names the signal, or (for a workload this short, now and then) loses the status altogether
    assert m.failure is not None
    assert f"SIG{sig}" in m.failure or "lost the workload's exit status" in m.failure


def test_ctrl_c_to_the_process_group_fails_the_run(tmp_path):
    backend = PerfStatBackend(["task-clock"])
    with open(tmp_path / STDERR_NAME, "w") as stderr:
        proc = subprocess.Popen(backend.wrap(["sleep", "5"], tmp_path, ("task-clock",)), stderr=stderr,
                                env={**os.environ, "LC_ALL": "C"}, start_new_session=True)  # fmt: skip
        wait_for_child(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        _, status, _ = os.wait4(proc.pid, 0)
    # perf ignores SIGINT, prints its counts, then re-raises the last signal it saw at exit: SIGINT,
    # or SIGCHLD (ignored, exit 0) when the child's death came last.  Either way the run failed.
    assert os.waitstatus_to_exitcode(status) in (0, -signal.SIGINT)
    m = backend.collect(tmp_path, ("task-clock",), status)
    assert m.failure is not None and "SIGINT" in m.failure


def test_unknown_event_is_a_clear_failure(tmp_path):
    backend = PerfStatBackend(["no-such-event"])
    group = backend.groups()[0]
    m = backend.collect(tmp_path, group, run_like_the_runner(backend, ["/bin/true"], tmp_path, group))
    assert m.failure.startswith("perf stat rejected its command line (exit 129)")


def test_probe_and_description_on_this_machine():
    budget = probe_counter_budget()
    text = describe_counters(budget)
    assert f"perf_event_paranoid:   {budget.perf_event_paranoid}" in text
    if pmu_counts_cycles():
        assert budget.pmu_present
    else:
        assert not budget.pmu_present and budget.usable_counters is None
        assert any('backend = "cachegrind"' in a for a in budget.advice)
        assert "hardware PMU:          no" in text


def test_screen_tells_a_syscall_heavy_command_from_a_user_loop():
    syscalls = screen_command(["dd", "if=/dev/zero", "of=/dev/null", "bs=4k", "count=300000"])
    loop = screen_command(["python3", "-c", "for i in range(4_000_000): pass"])
    assert syscalls.kernel_share is not None and loop.kernel_share is not None
    assert syscalls.kernel_share > 0.5 > loop.kernel_share
    assert syscalls.ctx_switches_per_s is not None and syscalls.ctx_switches_per_s >= 0
    assert rank([loop, syscalls])[0] is syscalls
    if not pmu_counts_cycles():
        assert syscalls.topdown is None and syscalls.note == NO_TOPDOWN


def test_rank_orders_by_frontend_then_kernel_share():
    a = ScreenResult(("a",), 0.9, 1.0, None, NO_TOPDOWN)
    b = ScreenResult(("b",), 0.2, 1.0, {"tma_frontend_bound": 0.30}, "")
    c = ScreenResult(("c",), 0.5, 1.0, {"tma_frontend_bound": 0.30}, "")
    d = ScreenResult(("d",), 0.1, 1.0, {"tma_frontend_bound": 0.45}, "")
    e = ScreenResult(("e",), None, None, None, NO_TOPDOWN)
    assert [r.argv[0] for r in rank([a, b, c, d, e])] == ["d", "c", "b", "a", "e"]
    assert [r.argv[0] for r in rank([e, a])] == ["a", "e"]
