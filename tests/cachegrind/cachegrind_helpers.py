"""Shared builds for the cachegrind tests: real gcc binaries, run under real valgrind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfab.run.backends.base import Measurement

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "cachegrind"

# Deterministic: no clock, no addresses printed, same output every run.
DETERMINISTIC_C = r"""
#include <stdio.h>
#include <stdlib.h>
static unsigned table[4096];
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000;
	unsigned x = 12345;
	for (long i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		table[x % 4096] += x;
	}
	fprintf(stderr, "workload stderr line\n");
	printf("sum %u\n", table[7] ^ table[4095]);
	return 0;
}
"""

SEGV_C = r"""
#include <signal.h>
int main(void) { raise(SIGSEGV); return 0; }
"""


@dataclass(frozen=True)
class Run:
    """One run through a backend: what it measured and what the workload printed."""

    measurement: Measurement  # the backend's reading
    stdout: str  # the run's standard output
    stderr: str  # the run's standard error
    status: int  # raw wait4 status


def execute(backend, argv: list[str], scratch: Path) -> Run:
    """wrap -> spawn -> wait4 -> collect, as the runner does."""
    scratch.mkdir(parents=True, exist_ok=True)
    cmd = backend.wrap(argv, scratch, ())
    with open(scratch / "stdout", "w+") as out, open(scratch / "stderr", "w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, _ = os.wait4(proc.pid, 0)
        proc.returncode = 0  # reaped by wait4 above
        out.seek(0), err.seek(0)
        return Run(backend.collect(scratch, (), status), out.read(), err.read(), status)


def _gcc(src: Path, exe: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(["gcc", "-O2", *flags, str(src), "-o", str(exe)])


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> dict[str, Path]:
    """Small C programs: ``det`` (deterministic), ``segv`` (dies by SIGSEGV)."""
    if shutil.which("gcc") is None or shutil.which("valgrind") is None:
        pytest.skip("needs gcc and valgrind (apt-get install gcc valgrind)")
    d = tmp_path_factory.mktemp("progs")
    (d / "det.c").write_text(DETERMINISTIC_C)
    (d / "segv.c").write_text(SEGV_C)
    procs = [_gcc(d / "det.c", d / "det"), _gcc(d / "segv.c", d / "segv")]
    assert all(p.wait() == 0 for p in procs)
    return {"det": d / "det", "segv": d / "segv"}


@pytest.fixture(scope="session")
def lockbench(tmp_path_factory) -> dict[str, Path]:
    """The bundled lock/unlock workload with 512 sites, unlock inlined and out of line (``shared_lockbench``)."""
    if shutil.which("gcc") is None or shutil.which("valgrind") is None:
        pytest.skip("needs gcc and valgrind (apt-get install gcc valgrind)")
    d = shared_lockbench(tmp_path_factory)
    return {"inline": d / "inline" / "lockbench", "outline": d / "outline" / "lockbench"}


def shared_lockbench(tmp_path_factory) -> Path:
    """``{inline,outline}/lockbench`` with 512 sites, built once per test session in its base directory: the
    cachegrind and e2e tests both need it, and one -O2 build of it took a minute on a busy 2-core machine.
    (tests/e2e/test_e2e_backends.py holds the same function: each tests/ folder imports its own helpers.)"""
    d = tmp_path_factory.getbasetemp() / "lockbench-512"
    if all((d / side / name).is_file() for side in ("inline", "outline") for name in ("lockbench", "lockbench.o")):
        return d
    building = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp(), prefix="lockbench-"))
    src = building / "lockbench.c"
    src.write_text(subprocess.run([sys.executable, str(REPO / "workloads" / "gen_lockbench.py"), "512"],
                                  capture_output=True, text=True, check=True).stdout)
    procs = []
    for side, flags in (("inline", ()), ("outline", ("-DUNLOCK_OUTLINE",))):
        (building / side).mkdir()
        procs.append(_gcc(src, building / side / "lockbench.o", "-c", *flags))  # an object, as make workloads
    assert all(p.wait() == 0 for p in procs)
    for side in ("inline", "outline"):
        subprocess.run(["gcc", "-o", str(building / side / "lockbench"), str(building / side / "lockbench.o")],
                       check=True)
    os.replace(building, d)
    return d
