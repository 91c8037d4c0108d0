"""The snapshot on this real machine, checked against the kernel and the tools themselves."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from machine_trees import copy_live
from perfab.errors import PerfabError
from perfab.machine import UNAVAILABLE, checks, describe, differences, snapshot
from perfab.machine.checks import Boost, Governor

CPU = Path("/sys/devices/system/cpu")


@pytest.fixture(scope="module")
def snap() -> dict[str, str]:
    return snapshot()


def test_kernel_release_is_uname(snap):
    assert snap["kernel.release"] == os.uname().release


def test_cmdline_is_proc_cmdline(snap):
    assert snap["kernel.cmdline"] == Path("/proc/cmdline").read_text().strip()


def test_cpu_model_is_cpuinfo_model_name(snap):
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    assert snap["cpu.model"] == models[0]


def test_online_and_threads_match_sysfs(snap):
    assert snap["cpu.online"] == (CPU / "online").read_text().strip()
    assert int(snap["cpu.threads"]) == os.cpu_count()


def test_every_cache_index_has_a_key_with_sysfs_geometry(snap):
    indexes = sorted((CPU / "cpu0" / "cache").glob("index*"))
    assert indexes, "this machine exposes its caches in sysfs"
    for index in indexes:
        read = lambda name: (index / name).read_text().strip()  # noqa: E731
        suffix = {"Data": "d", "Instruction": "i", "Unified": ""}[read("type")]
        value = snap[f"cache.L{read('level')}{suffix}"]
        size, ways, line = value.split(",")[0].split()
        assert ways == f"{read('ways_of_associativity')}-way"
        assert line == f"{read('coherency_line_size')}B"
        assert f"{read('number_of_sets')} sets" in value
        kib = int(read("size").rstrip("K"))
        # lscpu's rule: binary units, one decimal, half up (1280K prints as 1.3M)
        tenths = (kib * 10 + 512) // 1024
        assert size == (f"{kib}K" if kib < 1024 else f"{kib // 1024}M" if kib % 1024 == 0 else
                        f"{tenths // 10}.{tenths % 10}M")
    assert len([k for k in snap if k.startswith("cache.")]) == len(indexes)


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="lscpu not installed")
def test_cache_table_is_what_lscpu_prints(snap):
    columns = "NAME,ONE-SIZE,ALL-SIZE,WAYS,TYPE,LEVEL,SETS,COHERENCY-SIZE"
    out = subprocess.run(["lscpu", f"-C={columns}"], capture_output=True, text=True, check=True)
    lines = describe(snap)
    start = lines.index("Cache geometry (lscpu -C):") + 1
    table = [line for line in lines[start:] if line.startswith(("NAME", "L"))]
    assert table == [line.rstrip() for line in out.stdout.splitlines()]


@pytest.mark.parametrize("tool", ["perf", "valgrind", "gcc", "clang", "python3"])
def test_tool_version_is_the_tools_first_line(snap, tool):
    key = "tool.python" if tool == "python3" else f"tool.{tool}"
    if shutil.which(tool) is None:
        assert snap[key] == "absent"
        return
    env = dict(os.environ, LC_ALL="C")
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, env=env)
    first = [line.strip() for line in (out.stdout + out.stderr).splitlines() if line.strip()][0]
    assert snap[key] == first


@pytest.mark.skipif(shutil.which("systemd-detect-virt") is None, reason="no systemd-detect-virt")
@pytest.mark.parametrize("flag", ["vm", "container"])
def test_virtualisation_is_what_systemd_detect_virt_says(snap, flag):
    out = subprocess.run(["systemd-detect-virt", f"--{flag}"], capture_output=True, text=True)
    assert snap[f"virt.{flag}"] == out.stdout.strip()


def test_settings_match_their_files(snap):
    aslr = Path("/proc/sys/kernel/randomize_va_space").read_text().strip()
    assert snap["kernel.aslr"].endswith(f"({aslr})")
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    assert snap["kernel.perf_event_paranoid"] == paranoid
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    assert f"[{snap['mm.thp']}]" in thp
    flags = [line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")]
    assert snap["virt.hypervisor"] == ("yes" if "hypervisor" in flags[0].split() else "no")


def test_no_cpufreq_means_unavailable_and_no_advice(snap):
    if (CPU / "cpu0" / "cpufreq").exists():
        pytest.skip("this machine has cpufreq")
    assert snap["cpufreq.governor"] == UNAVAILABLE
    assert Governor().advice() is None
    assert Boost().advice() is None


def test_writing_a_governor_without_cpufreq_says_so():
    if (CPU / "cpu0" / "cpufreq").exists():
        pytest.skip("this machine has cpufreq: a write would change it")
    with pytest.raises(PerfabError, match="does not exist on this machine"):
        Governor().write("performance")


def test_snapshot_is_cheap():
    """CPU time, perfab's and its tools' (not wall time, which waits for the CPUs on a busy machine)."""
    best_s = min(_cpu_timed(snapshot) for _ in range(3))
    assert best_s < 0.5


def _cpu_timed(fn) -> float:
    import resource

    def used() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    start = used()
    fn()
    return used() - start


def test_copied_files_give_the_same_snapshot(tmp_path):
    live = snapshot(tools=False)
    copied = snapshot(copy_live(tmp_path), tools=False)
    assert differences(live, copied) == []


def test_every_value_is_a_nonempty_string(snap):
    assert all(isinstance(v, str) and v for v in snap.values())
    assert {c.name for c in checks()} <= snap.keys()
