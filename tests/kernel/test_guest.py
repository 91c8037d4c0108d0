"""Boot Debian's prebuilt kernel under TCG with a static syscall loop and check what comes back.

A deterministic (icount) boot of Debian's kernel costs about 8 s of QEMU CPU
time, a plain TCG one about 3.5 s; the file boots seven times (two of them
cut short: a timeout and a terminated launch).  One vCPU with the default
deterministic settings makes identical boots count exactly alike.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfab.kernel import qemu, tcg

KERNELS = sorted(glob.glob("/boot/vmlinuz-*"))
pytestmark = pytest.mark.skipif(not KERNELS or not qemu.shutil.which(qemu.QEMU),
                                reason="needs qemu-system-x86 and linux-image-amd64 (make sysdeps)")

LOOP_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
    const char *x = getenv("PERFAB_X");
    printf("looped %ld cpus %ld x %s\n", n, sysconf(_SC_NPROCESSORS_ONLN), x ? x : "-");
    fprintf(stderr, "to stderr\n");
    return (int)atol(argv[2]);
}
"""
N = 20000


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("guestloop")
    (d / "loop.c").write_text(LOOP_C)
    subprocess.run(["gcc", "-O2", "-static", "-o", str(d / "loop"), str(d / "loop.c")], check=True)
    return str(d / "loop")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("kcache"))


def _launch(request: Path) -> subprocess.CompletedProcess:
    """``python -m perfab.kernel.launch REQUEST`` with this checkout's sources."""
    env = {**os.environ, "PYTHONPATH": str(Path(qemu.__file__).parents[2])}
    return subprocess.run([sys.executable, "-m", "perfab.kernel.launch", str(request)],
                          capture_output=True, env=env, timeout=180)


def _boot(loop: str, cache_dir: str, n: int, vcpus: int = 1, status: int = 3,
          plugin: qemu.PluginOptions = qemu.PluginOptions(), kallsyms: bool = False,
          env: tuple = ()) -> qemu.BootResult:
    req = qemu.BootRequest(kernel=KERNELS[-1], argv=(loop, str(n), str(status)), vcpus=vcpus,
                           accel="tcg", plugin=plugin, timeout_s=120, cache_dir=cache_dir,
                           kallsyms=kallsyms, env=env)
    return qemu.boot(req)


@pytest.fixture(scope="module")
def runs(loop, cache_dir) -> dict[str, qemu.BootResult]:
    """1 vCPU: 2N counting (fetching the guest's symbols), N counting, N with the cache model; 2 vCPUs at N."""
    double = _boot(loop, cache_dir, 2 * N, kallsyms=True)
    return {"double": double, "one": _boot(loop, cache_dir, N),
            "cache": _boot(loop, cache_dir, N, plugin=qemu.PluginOptions(cache=True, l1i="16384:4:64")),
            "smp": _boot(loop, cache_dir, N, vcpus=2, status=0, env=(("PERFAB_X", "yes"),))}


def test_workload_output_and_status_come_back(runs):
    r = runs["one"]
    assert r.failure is None, r.console_tail
    assert r.stdout == f"looped {N} cpus 1 x -\n".encode()
    assert r.stderr == b"to stderr\n"
    assert r.status == 3
    assert r.accel == "tcg"
    assert r.guest_wall_s is not None and 0 < r.guest_wall_s < r.host_wall_s
    assert r.to_workload_s is not None and 0 < r.to_workload_s < r.host_wall_s


def test_the_guest_sees_every_vcpu_asked_for(runs):
    r = runs["smp"]
    assert r.failure is None, r.console_tail
    assert r.vcpus_seen == 2 and r.stdout == f"looped {N} cpus 2 x yes\n".encode() and r.status == 0
    (w,) = r.records
    assert w.vcpus == 2 and w.insns_kernel > 0


def test_plugin_counts_user_and_kernel_in_one_window(runs):
    (w,) = runs["one"].records
    assert w.vcpus == 1
    assert w.insns_user > 0 and w.insns_kernel > 0
    assert w.kernel_tbs and all(vaddr >= 0xFFFF800000000000 for vaddr, _, _ in w.kernel_tbs)
    assert sum(n for _, n, _ in w.kernel_tbs) == w.insns_kernel


def test_kernel_count_doubles_with_the_loop_and_user_count_too(runs):
    (one,), (two,) = runs["one"].records, runs["double"].records
    assert 1.8 < two.insns_kernel / one.insns_kernel < 2.1
    assert 1.8 < two.insns_user / one.insns_user < 2.1


def test_the_cache_model_changes_what_is_measured_not_what_runs(runs):
    (a,), (b,) = runs["one"].records, runs["cache"].records
    assert (a.insns_user, a.insns_kernel) == (b.insns_user, b.insns_kernel)


def test_interrupt_and_vmstat_deltas_are_reported(runs):
    d = runs["smp"].deltas
    assert d["vmstat.pgfault"] > 0  # exec of the loop faults its pages in
    assert "irq.CAL" in d and "irq.TLB" in d and d["irq.LOC"] >= 0


def test_symbols_of_a_syscall_loop_are_syscall_paths(runs):
    # Debian's System.map is a placeholder: the guest's /proc/kallsyms names the blocks
    syms = tcg.parse_symbols(runs["double"].kallsyms.decode())
    assert len(syms) > 10000
    by_insns, by_misses = tcg.symbolize(syms, runs["cache"].records[0], top=15)
    names = {s.name for s in by_insns}
    assert names & {"entry_SYSCALL_64", "do_syscall_64", "__x64_sys_getppid", "syscall_exit_to_user_mode"}
    assert by_insns[0].insns >= by_insns[-1].insns
    assert by_misses and by_misses[0].l1i_misses >= by_misses[-1].l1i_misses > 0


def test_cache_model_counts_between_markers(runs):
    r = runs["cache"]
    assert r.failure is None and r.status == 3, r.console_tail
    (w,) = r.records
    l1i, l1d, ll = w.cache["l1i"], w.cache["l1d"], w.cache["ll"]
    assert (l1i.size, l1i.assoc, l1i.line) == (16384, 4, 64)
    # every instruction is one L1i reference, counted per block as it starts
    assert abs(l1i.refs_user + l1i.refs_kernel - w.insns_user - w.insns_kernel) < 1000
    assert 0 < l1i.misses_kernel < l1i.refs_kernel
    assert 0 < l1d.refs_kernel and 0 < l1d.misses_user < l1d.refs_user
    # LL sees every L1 line that missed (an access straddling two lines may send both)
    assert ll.refs_user + ll.refs_kernel >= sum(c.misses_user + c.misses_kernel for c in (l1i, l1d))
    assert 0 < ll.misses_kernel <= ll.refs_kernel
    assert sum(m for _, _, m in w.kernel_tbs) == l1i.misses_kernel


def test_a_kernel_that_cannot_find_init_is_a_guest_failure_with_its_console(loop, cache_dir, tmp_path):
    req = {"kernel": KERNELS[-1], "argv": [loop, "1", "0"], "accel": "tcg", "cmdline": "rdinit=/nonexistent",
           "cache_dir": cache_dir, "timeout_s": 60, "result": str(tmp_path / "out.json")}
    (tmp_path / "req.json").write_text(json.dumps(req))
    proc = _launch(tmp_path / "req.json")  # a panic ends the boot: the failure is the panic, not the deadline
    assert proc.returncode == 125 and proc.stdout == b""
    assert proc.stderr.decode().startswith("perfab.kernel.launch: the guest kernel panicked")
    body = json.loads((tmp_path / "out.json").read_text())
    assert body["status"] is None and "panic" in body["failure"]
    assert "Kernel panic" in body["console_tail"] and body["windows"] == []


def test_a_guest_past_its_deadline_is_killed_with_a_failure(loop, cache_dir):
    start = time.monotonic()
    r = qemu.boot(qemu.BootRequest(kernel=KERNELS[-1], argv=(loop, "1", "0"), accel="tcg",
                                   timeout_s=2, cache_dir=cache_dir))
    assert time.monotonic() - start < 10
    assert r.status is None and "did not finish within 2 s" in r.failure


def test_launch_repeats_an_identical_boot_exactly(runs, loop, cache_dir, tmp_path):
    """The same request as runs["one"], through the launch module: same output, same counts."""
    req = {"kernel": KERNELS[-1], "argv": [loop, str(N), "3"], "vcpus": 1, "accel": "tcg",
           "plugin": {}, "cache_dir": cache_dir, "symbols": "guest", "top": 10,
           "result": str(tmp_path / "out.json"), "timeout_s": 120}
    (tmp_path / "req.json").write_text(json.dumps(req))
    proc = _launch(tmp_path / "req.json")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == f"looped {N} cpus 1 x -\n".encode() and proc.stderr == b"to stderr\n"
    body = json.loads((tmp_path / "out.json").read_text())
    assert body["status"] == 3 and body["failure"] is None and body["vcpus_seen"] == 1
    (one,) = runs["one"].records
    assert body["counts"] == {"insns_user": one.insns_user, "insns_kernel": one.insns_kernel}
    assert len(body["windows"]) == 1 and body["deltas"]["vmstat.pgfault"] > 0
    names = [name for name, _, _ in body["symbols"]["by_insns"]]
    assert len(names) == 10 and "entry_SYSCALL_64" in names


def test_launch_rejects_a_bad_request_in_one_line(tmp_path):
    (tmp_path / "req.json").write_text(json.dumps({"kernel": "/nonexistent", "argv": ["x"], "vcpu": 2}))
    proc = _launch(tmp_path / "req.json")
    assert proc.returncode == 2
    assert proc.stderr.count(b"\n") == 1 and b"unknown key(s) vcpu" in proc.stderr


def test_kvm_probe_is_quick_and_auto_falls_back_to_tcg():
    start = time.monotonic()
    works = qemu.probe_kvm()
    assert time.monotonic() - start < 8
    req = qemu.BootRequest(kernel=KERNELS[-1], argv=("true",))
    assert qemu.choose_accel(req) == ("kvm" if works else "tcg")
    assert qemu.choose_accel(qemu.BootRequest(kernel=KERNELS[-1], argv=("true",),
                                              plugin=qemu.PluginOptions())) == "tcg"


def test_a_terminated_launch_takes_its_guest_down(loop, tmp_path):
    cache = tmp_path / "own-cache"  # names this guest's QEMU among the machine's processes
    req = {"kernel": KERNELS[-1], "argv": [loop, "1", "0"], "accel": "tcg", "cache_dir": str(cache),
           "timeout_s": 120, "result": str(tmp_path / "out.json")}
    (tmp_path / "req.json").write_text(json.dumps(req))
    env = {**os.environ, "PYTHONPATH": str(Path(qemu.__file__).parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "perfab.kernel.launch", str(tmp_path / "req.json")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not _guests_using(cache) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _guests_using(cache), "QEMU never started"
    proc.terminate()
    assert proc.wait(timeout=10) == 143
    assert not _guests_using(cache)


def _guests_using(path: Path) -> list[int]:
    """Pids of the QEMU processes whose command line names ``path``."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            cmdline = (d / "cmdline").read_bytes() if d.name.isdigit() else b""
            if cmdline.startswith(qemu.qemu_binary().encode()) and str(path).encode() in cmdline:
                found.append(int(d.name))
        except OSError:
            continue
    return found
