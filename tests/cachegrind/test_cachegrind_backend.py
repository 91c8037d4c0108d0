"""The cachegrind backend end to end: real valgrind on real gcc-built binaries."""

from __future__ import annotations

import re

import pytest
from cachegrind_helpers import execute

from perfab.errors import ToolError, UsageError
from perfab.machine.caches import host_geometry, resolve_geometry
from perfab.run.backends.cachegrind import SIMULATION_NOTE, CachegrindBackend, valgrind_version

METRICS = {"instructions", "I1 misses", "D1 misses", "LL misses", "I1 MPKI", "D1 refs"}
FIXED = dict(l1i="32K,8,64", l1d="48K,12,64", ll="32M,16,64")


def test_seam():
    backend = CachegrindBackend(**FIXED)
    info = backend.metric_info()
    assert backend.name == "cachegrind" and backend.groups() == ((),)
    assert set(info) == METRICS and all(i.exact for i in info.values())
    assert all(info[m].higher_is_better is False for m in METRICS - {"D1 refs"})


def test_wrap_command(tmp_path):
    cmd = CachegrindBackend(**FIXED).wrap(["./w", "1"], tmp_path, ())
    assert cmd[1:6] == ["--tool=cachegrind", "--cache-sim=yes", "--I1=32768,8,64", "--D1=49152,12,64",
                        "--LL=33554432,16,64"]
    assert f"--cachegrind-out-file={tmp_path}/cachegrind.out.%p" in cmd
    assert f"--log-file={tmp_path}/valgrind.log.%p" in cmd
    assert "--trace-children=yes" in cmd
    assert cmd[-3:] == ["--", "./w", "1"]
    single = CachegrindBackend(trace_children=False, **FIXED).wrap(["./w"], tmp_path, ())
    assert f"--cachegrind-out-file={tmp_path}/cachegrind.out" in single and "--trace-children=yes" not in single


def test_identical_runs_identical_counts(programs, tmp_path):
    backend = CachegrindBackend(**FIXED)
    first = execute(backend, [str(programs["det"]), "20000"], tmp_path / "a")
    second = execute(backend, [str(programs["det"]), "20000"], tmp_path / "b")
    assert set(first.measurement.metrics) == METRICS
    assert first.measurement.metrics == second.measurement.metrics
    assert first.measurement.metrics["instructions"] > 20000 * 5


def test_notes_and_clean_stderr(programs, tmp_path):
    run = execute(CachegrindBackend(**FIXED), [str(programs["det"]), "100"], tmp_path)
    assert run.stderr == "workload stderr line\n"  # valgrind's log went to the scratch dir
    assert run.stdout.startswith("sum ")
    (log,) = tmp_path.glob("valgrind.log.*")
    assert "Cachegrind" in log.read_text()
    notes = run.measurement.notes
    assert notes[0] == SIMULATION_NOTE
    assert f"valgrind {valgrind_version()} (cachegrind)" in notes
    assert "cache geometry: I1=32K,8,64 D1=48K,12,64 LL=32M,16,64" in notes
    assert run.measurement.failure is None and run.measurement.excluded == {}


def test_inlined_unlock_fewer_instructions_more_i1_misses(lockbench, tmp_path):
    backend = CachegrindBackend(l1i="32K,8,64")
    inline = execute(backend, [str(lockbench["inline"]), "20000"], tmp_path / "inline").measurement.metrics
    outline = execute(backend, [str(lockbench["outline"]), "20000"], tmp_path / "outline").measurement.metrics
    assert inline["instructions"] < outline["instructions"]
    assert inline["I1 misses"] > outline["I1 misses"]
    assert inline["I1 MPKI"] > outline["I1 MPKI"]


def test_host_geometry_by_default(programs, tmp_path):
    """The host's caches, each adjusted as valgrind needs (a 260M 20-way L3 is not a power of two of sets)."""
    run = execute(CachegrindBackend(), [str(programs["det"]), "100"], tmp_path)
    expected, adjustments = resolve_geometry({}, host_geometry())
    assert f"cache geometry: {expected.describe()}" in run.measurement.notes
    assert set(adjustments) <= set(run.measurement.notes)


def test_nearest_geometry_for_a_27_5M_l3_runs(programs, tmp_path):
    run = execute(CachegrindBackend(ll="28M,14,64"), [str(programs["det"]), "100"], tmp_path)
    assert run.measurement.failure is None
    assert any(n.endswith("LL=28M,14,64") for n in run.measurement.notes)


def test_bad_geometry_is_usage_error():
    with pytest.raises(UsageError, match=r"l1i='32K,8' is not a cache geometry.*l1i=\"32K,8,64\""):
        CachegrindBackend(l1i="32K,8")
    with pytest.raises(UsageError, match='ll="28M,14,64"'):
        CachegrindBackend(ll="27.5M,11,64")


def test_valgrind_missing_is_tool_error_with_fix(tmp_path):
    with pytest.raises(ToolError, match=r"apt-get install valgrind"):
        CachegrindBackend(valgrind=str(tmp_path / "no" / "valgrind"), **FIXED)


def test_valgrind_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", valgrind_version())


def test_callgrind_region(lockbench, tmp_path):
    argv = [str(lockbench["inline"]), "2000"]
    whole = execute(CachegrindBackend(**FIXED), argv, tmp_path / "whole").measurement
    region = execute(CachegrindBackend(callgrind_toggle="site1*", **FIXED), argv, tmp_path / "region").measurement
    assert 0 < region.metrics["instructions"] < whole.metrics["instructions"] / 4
    assert f"valgrind {valgrind_version()} (callgrind, toggle-collect=site1*)" in region.notes
    assert "cache geometry: I1=32K,8,64 D1=48K,12,64 LL=32M,16,64" in region.notes
    assert len(list((tmp_path / "region").glob("callgrind.out.*"))) == 1


def test_callgrind_region_never_entered_is_excluded(programs, tmp_path):
    backend = CachegrindBackend(callgrind_toggle="no_such_fn", **FIXED)
    m = execute(backend, [str(programs["det"]), "10"], tmp_path).measurement
    assert m.metrics["instructions"] == 0
    assert set(m.excluded) == set(m.metrics) and "never ran" in m.excluded["instructions"]


def test_bad_toggle_is_usage_error():
    with pytest.raises(UsageError, match="callgrind_toggle"):
        CachegrindBackend(callgrind_toggle="two words", **FIXED)


def test_killed_workload_counts_excluded(programs, tmp_path):
    m = execute(CachegrindBackend(**FIXED), [str(programs["segv"])], tmp_path).measurement
    assert m.failure is None and "workload killed by SIGSEGV" in m.notes
    assert set(m.excluded) == set(m.metrics) and "part of the run" in m.excluded["instructions"]


def test_no_out_file_is_a_failure(tmp_path):
    run = execute(CachegrindBackend(**FIXED), [str(tmp_path / "no-such-program")], tmp_path)
    assert run.measurement.failure.startswith("valgrind wrote no cachegrind out file (exit 127)")
    assert "no-such-program" in run.stderr


def test_stale_out_file_is_not_reused(programs, tmp_path):
    backend = CachegrindBackend(**FIXED)
    execute(backend, [str(programs["det"]), "10"], tmp_path)
    second = execute(backend, [str(tmp_path / "no-such-program")], tmp_path)
    assert second.measurement.failure is not None


def test_children_followed_and_summed(programs, tmp_path):
    det = str(programs["det"])
    one = execute(CachegrindBackend(**FIXED), [det, "5000"], tmp_path / "one").measurement
    shell = ["/bin/sh", "-c", f"{det} 5000; {det} 5000"]
    both = execute(CachegrindBackend(**FIXED), shell, tmp_path / "both").measurement
    assert both.metrics["instructions"] > 2 * one.metrics["instructions"]
    assert "counts summed over 3 processes" in both.notes
    # Not following: only the shell is counted, the two children run natively.
    untraced = execute(CachegrindBackend(trace_children=False, **FIXED), shell, tmp_path / "sh")
    assert untraced.stdout.count("sum ") == 2
    shell_only = both.metrics["instructions"] - 1.5 * one.metrics["instructions"]
    assert untraced.measurement.metrics["instructions"] < shell_only


def test_exec_wrapper(programs, tmp_path):
    argv = ["taskset", "-c", "0", str(programs["det"]), "5000"]
    alone = execute(CachegrindBackend(**FIXED), argv[3:], tmp_path / "alone").measurement
    wrapped = execute(CachegrindBackend(**FIXED), argv, tmp_path / "wrapped").measurement
    # taskset's own work before exec is not dumped: only the workload, its stack laid out a little differently
    assert wrapped.metrics["instructions"] == pytest.approx(alone.metrics["instructions"], rel=0.01)
    lost = execute(CachegrindBackend(trace_children=False, **FIXED), argv, tmp_path / "lost").measurement
    assert "use trace_children=True" in lost.failure
