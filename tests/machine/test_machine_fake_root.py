"""Checks and snapshots reading a tree of real-shaped files instead of /."""

from __future__ import annotations

from pathlib import Path

import pytest

from machine_trees import CPU, put, skylake_sp
from perfab.machine import UNAVAILABLE, UNKNOWN, checks, describe, snapshot
from perfab.machine.checks import (
    Aslr, Boost, Governor, NmiWatchdog, PerfEventParanoid, Smt, TransparentHugepages,
)
from perfab.machine.noise import Hypervisor, IsolatedCpus, LoadAverage, NohzFull

# lscpu -C on the two-socket Xeon Gold 6138, as quoted in the SETUP block of
# the inlining report in /work/shared/seeds/000_*.txt.
SEED_LSCPU = """\
NAME ONE-SIZE ALL-SIZE WAYS TYPE        LEVEL  SETS PHY-LINE COHERENCY-SIZE
L1d       32K     1.3M    8 Data            1    64        1             64
L1i       32K     1.3M    8 Instruction     1    64        1             64
L2         1M      40M   16 Unified         2  1024        1             64
L3      27.5M      55M   11 Unified         3 40960        1             64
"""


@pytest.fixture(scope="module")
def skylake(tmp_path_factory) -> Path:
    return skylake_sp(tmp_path_factory.mktemp("skylake"))


def test_skylake_topology_and_caches(skylake):
    snap = snapshot(skylake, tools=False)
    assert (snap["cpu.sockets"], snap["cpu.cores"], snap["cpu.threads"]) == ("2", "40", "80")
    assert snap["cache.L1i"] == "32K 8-way 64B, 64 sets, 40 instances (1.3M)"
    assert snap["cache.L3"] == "27.5M 11-way 64B, 40960 sets, 2 instances (55M)"


def test_skylake_describe_reproduces_the_seed_setup_block(skylake):
    lines = describe(snapshot(skylake, tools=False))
    assert lines[0] == "Hardware: 2x Intel(R) Xeon(R) Gold 6138 CPU @ 2.00GHz, 20 cores/socket, 40C/80T"
    ours = [line.split() for line in lines if line[:2] in ("L1", "L2", "L3")]
    seed_rows = [line.split() for line in SEED_LSCPU.splitlines()[1:]]
    assert ours == [row[:7] + row[8:] for row in seed_rows]  # all but PHY-LINE


def test_describe_names_hypervisor_and_container():
    snap = {"cpu.model": "AMD EPYC", "cpu.sockets": "1", "cpu.cores": "2", "cpu.threads": "2",
            "virt.hypervisor": "yes", "virt.vm": "kvm", "virt.container": "none", "kernel.release": "6.1.0"}
    assert describe(snap)[:2] == [
        "Hardware: 1x AMD EPYC, 2 cores/socket, 2C/2T; under a hypervisor (kvm)", "Kernel: 6.1.0"]


def test_mixed_governors_are_summarised_per_cpu_range(skylake):
    assert Governor(skylake).show() == "powersave (CPU 0-3), performance (CPU 4-79)"
    assert "set it to performance" in Governor(skylake).advice()


def test_intel_pstate_no_turbo_reads_inverted(skylake):
    assert Boost(skylake).show() == "on"
    assert "intel_pstate/no_turbo" in Boost(skylake).advice()


def test_smt_on_gets_advice_and_isolation_advice(skylake):
    assert Smt(skylake).show() == "on"
    assert Smt(skylake).advice() is not None
    assert IsolatedCpus(skylake).show() == "none"
    assert "isolcpus" in IsolatedCpus(skylake).advice()


def test_bare_metal_has_no_hypervisor(skylake):
    assert Hypervisor(skylake).show() == "no"
    assert Hypervisor(skylake).advice() is None


def test_settings_files_in_their_real_formats(tmp_path):
    root = put(tmp_path, {
        "proc/sys/kernel/randomize_va_space": "0\n",
        "proc/sys/kernel/nmi_watchdog": "1\n",
        "proc/sys/kernel/perf_event_paranoid": "-1\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
        "proc/loadavg": "3.10 1.02 0.40 4/311 98765\n",
        f"{CPU}/online": "0-3\n",
        f"{CPU}/isolated": "2-3\n",
        f"{CPU}/nohz_full": "(null)\n",
    })
    assert (Aslr(root).show(), NmiWatchdog(root).show(), TransparentHugepages(root).show()) == (
        "off (0)", "on", "always")
    assert all(c(root).advice() for c in (Aslr, NmiWatchdog, TransparentHugepages))
    assert PerfEventParanoid(root).show() == "-1"
    assert LoadAverage(root).show() == "3.10 1.02 0.40"
    assert "3.1 on 4 CPUs" in LoadAverage(root).advice()
    assert (IsolatedCpus(root).show(), NohzFull(root).show()) == ("2-3", "none")
    assert "nohz_full=2-3" in NohzFull(root).advice()


def test_empty_root_is_all_unavailable_without_raising(tmp_path):
    snap = snapshot(tmp_path, tools=False)
    for check in checks(tmp_path):
        assert snap[check.name] in (UNAVAILABLE, UNKNOWN), check.name
        assert check.advice() is None, check.name
    assert snap["kernel.release"] == UNAVAILABLE
    assert describe(snap)[0].startswith("Hardware: unavailable")


def test_unreadable_files_are_unknown(tmp_path):
    (tmp_path / "proc/sys/kernel/randomize_va_space").mkdir(parents=True)  # a directory: EISDIR
    put(tmp_path, {
        "proc/sys/kernel/nmi_watchdog": "yes\n",  # not a value the kernel writes
        "sys/kernel/mm/transparent_hugepage/enabled": "always madvise never\n",  # nothing selected
        "proc/loadavg": "garbage\n",
        f"{CPU}/isolated": "two-three\n",
    })
    (tmp_path / f"{CPU}/smt").mkdir(parents=True)
    (tmp_path / f"{CPU}/smt/control").write_bytes(b"\xff\xfe\n")  # not text
    snap = snapshot(tmp_path, tools=False)
    for key in ("kernel.aslr", "kernel.nmi_watchdog", "mm.thp", "load.avg", "cpu.isolated", "cpu.smt"):
        assert snap[key] == UNKNOWN, key
    assert LoadAverage(tmp_path).advice() is None
