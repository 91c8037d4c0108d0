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
import subprocess
from pathlib import Path

import pytest

from perfab.cli import main

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
runs = 3
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
""")
    return spec


def test_pti_costs_kernel_instructions_per_syscall_and_user_code_stays_flat(loop, tmp_path):
    db = tmp_path / "r.db"
    code, out, err = _run(["run", str(_spec(tmp_path, loop)), "--db", str(db)])
    assert code == 0, err
    code, out, err = _run(["report", "pti", "--db", str(db), "--format", "json"])
    assert code == 0, err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    kernel, user = rows["instructions:k"], rows["instructions:u"]
    assert kernel["verdict"] == "**" and kernel["delta"] > 0, kernel
    per_call = (kernel["median_exp"] - kernel["median_base"]) / 20000
    assert per_call > 5, f"pti=on adds {per_call:.1f} kernel instructions per getppid"
    assert user["verdict"] in ("flat", "~"), user
    assert abs(user["median_exp"] - user["median_base"]) <= 1e-3 * user["median_base"], user
    code, text, err = _run(["report", "pti", "--db", str(db)])
    assert code == 0 and "emulated" in text and "TCG" in text, text
    assert "[k] " in text, text  # kernel symbols from the guest's kallsyms


def test_a_kernel_that_cannot_boot_is_a_failed_run_with_the_console_tail(loop, tmp_path):
    spec = _spec(tmp_path, loop, cmdline_b="pti=off init=/nonexistent rdinit=/nonexistent")
    db = tmp_path / "r.db"
    text = spec.read_text().replace("runs = 3", "runs = 1\nmax_failures = 0")
    spec.write_text(text)
    code, out, err = _run(["run", str(spec), "--db", str(db)])
    assert code != 0
    assert "console:" in err and "\n" in err, err
