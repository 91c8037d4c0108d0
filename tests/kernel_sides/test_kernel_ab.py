"""End to end: Debian's prebuilt 6.1 kernel on both sides, booted under QEMU, command lines apart.

Side ``pti`` forces page-table isolation (``pti=on``): every system call
then switches CR3 on entry and exit, so the kernel runs more instructions
per call; side ``nopti`` turns it off.  The user-space loop is the same
program on both sides, so its instructions must not move.  No kernel is
built: the image is the one ``make test`` installs (linux-image-amd64).
"""

from __future__ import annotations

import glob
import io
import json
import shutil
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from perfab.cli import main
from perfab.store import open_store

IMAGES = sorted(glob.glob("/boot/vmlinuz-*"))
pytestmark = pytest.mark.skipif(not IMAGES or shutil.which("qemu-system-x86_64") is None,
                                reason="make test installs qemu-system-x86 and linux-image-amd64")
LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv)
{
	long n = atol(argv[1]), s = 0;
	for (long i = 0; i < n; i++)
		s += syscall(SYS_getppid);
	printf("calls: %ld\n", n + 0 * s);
	return 0;
}
"""


def _run(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(args, out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> Path:
    """A static getppid loop, compiled here."""
    build = tmp_path_factory.mktemp("loop")
    (build / "loop.c").write_text(LOOP)
    subprocess.run(["gcc", "-O2", "-static", "-o", str(build / "loop"), str(build / "loop.c")], check=True)
    return build / "loop"


def _spec(tmp_path: Path, loop: Path, cmdline_b: str = "pti=on", image: str = IMAGES[-1] if IMAGES else "") -> Path:
    spec = tmp_path / "k.toml"
    spec.write_text(f"""
[experiment]
name = "pti"
runs = 5
warmup = 0
[[variant]]
name = "nopti"
[variant.kernel]
image = "{image}"
cmdline = "pti=off"
[[variant]]
name = "pti"
[variant.kernel]
image = "{image}"
cmdline = "{cmdline_b}"
[[workload]]
name = "getppid"
argv = ["{loop}", "20000"]
timeout = 120
[measure]
backend = "guest"
accel = "tcg"
vmstat = ["pgfault"]
boots = 5
""")
    return spec


ENTRY_EXIT = ("[k] entry_SYSCALL_64", "[k] syscall_return_via_sysret")  # where pti switches CR3, in the profile


def _entry_exit_per_call(db: Path) -> dict[str, float]:
    """Each side's median kernel instructions per getppid in the system call's entry and exit code (the runs'
    profile shares of instructions:k).  The window's whole kernel count also holds work the boot left pending
    (RCU callbacks, LRU batches), which differs between two kernels' guests by up to 1.3 instructions per call
    here and can hide the per-call cost; the entry and exit code is where page-table isolation costs."""
    with open_store(db, create=False) as store:
        side = {r["run_id"]: r["variant"] for r in store.run_rows("pti") if not r["warmup"]}
        kernel = {rid: v for rid, metric, v in store.samples("pti") if metric == "instructions:k"}
        share: dict[int, float] = defaultdict(float)
        for rid, key, value in store.profile_shares("pti"):
            share[rid] += value if key in ENTRY_EXIT else 0.0
    calls: dict[str, list[float]] = defaultdict(list)
    for rid, name in side.items():
        calls[name].append(share[rid] / 100 * kernel[rid] / 20000)
    return {name: statistics.median(v) for name, v in calls.items()}


def test_pti_costs_kernel_instructions_per_syscall_and_user_code_stays_flat(loop, tmp_path):
    db = tmp_path / "r.db"
    code, out, err = _run(["run", str(_spec(tmp_path, loop)), "--db", str(db)])
    assert code == 0, err
    code, out, err = _run(["report", "pti", "--db", str(db), "--format", "json"])
    assert code == 0, err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    kernel, user = rows["instructions:k"], rows["instructions:u"]
    assert kernel["verdict"] == "**" and kernel["delta"] > 0, kernel
    per_call = _entry_exit_per_call(db)
    assert per_call["pti"] - per_call["nopti"] > 5, f"pti=on adds {per_call} kernel instructions per getppid"
    assert user["verdict"] in ("flat", "~"), user
    assert abs(user["median_exp"] - user["median_base"]) <= 1e-3 * user["median_base"], user
    code, text, err = _run(["report", "pti", "--db", str(db)])
    assert code == 0 and "emulated" in text and "TCG" in text, text
    assert "[k] " in text, text  # kernel symbols from the guest's kallsyms


def test_a_kernel_that_cannot_boot_is_a_failed_run_with_the_console_tail(loop, tmp_path):
    spec = _spec(tmp_path, loop, cmdline_b="pti=off mem=20M")  # too little memory to unpack its initramfs
    db = tmp_path / "r.db"
    text = spec.read_text().replace("runs = 5", "runs = 1\nmax_failures = 0")
    spec.write_text(text)
    code, out, err = _run(["run", str(spec), "--db", str(db)])
    assert code != 0
    assert "console:" in err and "\n" in err, err


def test_auto_takes_kvm_only_where_the_sides_kernel_boots_under_it(loop, tmp_path):
    """Here a tiny image runs under KVM while a real kernel hangs after the BIOS: auto must not trust the device."""
    from perfab.kernel import qemu
    from perfab.kernel.sides import KernelImage, choose_accel

    kernel = KernelImage(Path(IMAGES[-1]), None, Path(IMAGES[-1]).name)
    said: list[str] = []
    accel = choose_accel("auto", said.append, kernel, tmp_path)
    assert accel in ("kvm", "tcg") and said and said[0].startswith(f"guest: {accel.upper()}")
    if accel == "kvm":
        result = qemu.boot(qemu.BootRequest(kernel=IMAGES[-1], argv=(str(loop), "10"), accel="kvm", plugin=None,
                                            timeout_s=60, deterministic=False, cache_dir=str(tmp_path / "guest")))
        assert result.failure is None and b"calls: 10" in result.stdout, result.console_tail


@pytest.mark.parametrize("words", ["rdinit=/bin/sh", "init=/sbin/init", "pti=off -- x"])
def test_a_command_line_that_takes_perfabs_init_away_is_refused(loop, tmp_path, words):
    """init= or rdinit= start another program than the one that runs the workload, and `--` hands perfab's later
    options (the boot's perturbation among them) to init: refused before anything runs, naming the word."""
    spec = _spec(tmp_path, loop, cmdline_b=words)
    code, out, err = _run(["run", str(spec), "--db", str(tmp_path / "r.db")])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "variant.kernel.cmdline" in err and ("init" in err or "'--'" in err), err
    assert not (tmp_path / "r.db").exists() or "pti" not in _run(["list", "--db", str(tmp_path / "r.db")])[1]
