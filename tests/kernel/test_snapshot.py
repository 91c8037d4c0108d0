"""A guest restored from its snapshot counts what a fresh boot counts: Debian's kernel, one vCPU, icount.

One fresh boot goes to the snapshot point, is saved there and runs its
workload; two boots then restore that state, one with the same request and
one with another.  The plugin counts with the cache and branch models on, and
the guest sends its /proc/kallsyms, so the comparison covers the totals, every
model's counts, /proc deltas, the emulated wall time and each kernel symbol's
instructions.  A fresh boot of Debian's kernel costs about 30 s under load; a
restore about 2-4 s.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from perfab.errors import UsageError
from perfab.kernel import qemu, tcg
from perfab.run.backends.guest import read_result

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
    printf("looped %ld x %s\n", n, x ? x : "-");
    return 0;
}
"""
N = 20000
MODELS = qemu.PluginOptions(cache=True, branch=True)


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("snaploop")
    (d / "loop.c").write_text(LOOP_C)
    subprocess.run(["gcc", "-O2", "-static", "-o", str(d / "loop"), str(d / "loop.c")], check=True)
    return str(d / "loop")


@pytest.fixture(scope="module")
def base(loop, tmp_path_factory) -> qemu.BootRequest:
    return qemu.BootRequest(kernel=KERNELS[-1], argv=(loop, str(N)), accel="tcg", plugin=MODELS, timeout_s=300,
                            cache_dir=str(tmp_path_factory.mktemp("snapcache")), snapshot=True)


@pytest.fixture(scope="module")
def runs(base) -> dict[str, qemu.BootResult]:
    """A fresh boot that saves the guest and fetches the kernel's symbols (after its workload, as a session's first
    run of a kernel does), then two restores that do not."""
    fresh = qemu.boot(replace(base, kallsyms=True))
    return {"fresh": fresh, "again": qemu.boot(base),
            "other": qemu.boot(replace(base, argv=(base.argv[0], str(2 * N)), env=(("PERFAB_X", "yes"),)))}


def _window(res: qemu.BootResult) -> tcg.Window:
    assert res.failure is None, f"{res.failure}\n{res.console_tail}"
    assert len(res.records) == 1
    return res.records[0]


def test_the_first_boot_saves_the_guest_and_later_runs_restore_it(runs, base):
    assert runs["fresh"].start == "saved" and runs["again"].start == "restored"
    assert runs["fresh"].snapshot == runs["again"].snapshot == runs["other"].snapshot != ""
    saved = Path(base.cache_dir, "snapshots", f"{runs['fresh'].snapshot}.state")
    assert saved.stat().st_size > 10 << 20  # the guest's memory in use: kernel, init, page cache


def test_a_restored_guest_counts_what_the_fresh_boot_counted(runs):
    fresh, again = _window(runs["fresh"]), _window(runs["again"])
    assert (again.insns_user, again.insns_kernel) == (fresh.insns_user, fresh.insns_kernel)
    assert again.cache == fresh.cache and again.branches == fresh.branches
    assert runs["again"].deltas == runs["fresh"].deltas  # /proc/interrupts and /proc/vmstat around the window
    assert runs["again"].guest_wall_s == runs["fresh"].guest_wall_s  # icount: emulated time is instructions
    assert runs["again"].stdout == runs["fresh"].stdout == f"looped {N} x -\n".encode()


def test_every_kernel_symbol_counts_the_same_after_a_restore(runs):
    symbols = tcg.parse_symbols(runs["fresh"].kallsyms.decode())
    assert len(symbols) > 10000  # the guest sent its kallsyms on the fresh boot
    top = 10 ** 6
    by_fresh, _ = tcg.symbolize(symbols, _window(runs["fresh"]), top=top)
    by_again, _ = tcg.symbolize(symbols, _window(runs["again"]), top=top)
    assert len(by_fresh) > 50 and by_again == by_fresh
    assert any(s.name == "__x64_sys_getppid" and s.insns >= N for s in by_fresh)


def test_each_restored_run_is_given_its_own_request(runs):
    other, fresh = _window(runs["other"]), _window(runs["fresh"])
    assert runs["other"].start == "restored" and runs["other"].stdout == f"looped {2 * N} x yes\n".encode()
    assert other.insns_user > fresh.insns_user + N and other.insns_kernel > fresh.insns_kernel


def test_the_launcher_result_says_the_run_was_restored(runs, base, tmp_path):
    request = {"kernel": base.kernel, "argv": list(base.argv), "accel": "tcg", "plugin": {"cache": False},
               "cache_dir": base.cache_dir, "snapshot": True, "timeout_s": 300, "result": str(tmp_path / "r.json")}
    (tmp_path / "req.json").write_text(json.dumps(request))
    env = {**os.environ, "PYTHONPATH": str(Path(qemu.__file__).parents[2])}
    done = subprocess.run([sys.executable, "-m", "perfab.kernel.launch", str(tmp_path / "req.json")],
                          capture_output=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    body = json.loads((tmp_path / "r.json").read_text())
    assert body["start"] == "restored" and body["snapshot"] == runs["fresh"].snapshot
    assert body["counts"]["insns_user"] == runs["fresh"].records[0].insns_user  # no model: the same count
    note = read_result(tmp_path / "r.json").notes[0]
    assert f"restored from the side's saved guest {runs['fresh'].snapshot[:12]}" in note


def test_a_request_larger_than_the_snapshot_point_takes_is_refused(runs, base):
    with pytest.raises(UsageError, match="more than the 1,048,576 a guest takes at its snapshot point"):
        qemu.boot(replace(base, env=(("BIG", "x" * (1 << 20)),)))


def test_a_saved_guest_qemu_cannot_load_fails_its_run_and_is_dropped(runs, base, tmp_path):
    saved = Path(base.cache_dir, "snapshots", f"{runs['fresh'].snapshot}.state")
    kept = tmp_path / "kept.state"
    os.replace(saved, kept)
    saved.write_bytes(kept.read_bytes()[: 1 << 20])  # cut short
    try:
        res = qemu.boot(replace(base, timeout_s=120))
        assert res.start == "restored" and res.failure is not None and res.status is None
        assert res.failure.startswith(f"QEMU could not load the side's saved guest {runs['fresh'].snapshot[:12]} "
                                      "(qemu-system-x86_64: ")
        assert res.failure.endswith("it was dropped, and the next run boots and saves it again")
        assert not saved.exists()  # the next run saves it again
    finally:
        os.replace(kept, saved)


@pytest.fixture(scope="module")
def seeded(base) -> dict[str, qemu.BootResult]:
    """A randomised boot saved at its point under a boot word, then restores of it given run seeds: the same seed
    twice, and another (``perfab.replication``: the guest's randomisation on, seeded)."""
    boot = replace(base, cmdline="perfab_boot=k3x9", randomized=True, plugin=qemu.PluginOptions())
    one = replace(boot, entropy=bytes(range(64)), spin=1000)
    return {"saved": qemu.boot(one), "same": qemu.boot(one),
            "other": qemu.boot(replace(boot, entropy=bytes(range(64, 128)), spin=250_000))}


def test_a_seeded_run_repeats_exactly_and_another_seed_is_another_draw(seeded):
    """The same boot word and run seed count the same instructions restored as booted: a session is reproducible
    from its seed; another run seed (the guest's random pool, the spin before the workload) moves the kernel's
    count, since what the kernel randomises follows it."""
    saved, same, other = (_window(seeded[k]) for k in ("saved", "same", "other"))
    assert seeded["saved"].start == "saved" and seeded["same"].start == seeded["other"].start == "restored"
    assert (same.insns_user, same.insns_kernel) == (saved.insns_user, saved.insns_kernel)
    assert other.insns_kernel != saved.insns_kernel
