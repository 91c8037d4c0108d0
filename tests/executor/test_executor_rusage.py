"""The workload's own rusage: max RSS is never perfab's, however large perfab is."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys

import pytest

from perfab.run.executor import RealExecutor
from perfab.run.trampoline import read_rusage, rusage_shim

ENV = dict(os.environ, LC_ALL="C")
MIB = 1024  # KiB

TOUCH_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
	char *p = malloc(mib << 20 | 1);
	for (size_t i = 0; i < mib << 20; i += 4096)
		p[i] = 1;
	printf("%zu\n", mib);
	return p[0] - (mib ? 1 : p[0]);
}
"""


@pytest.fixture(scope="module")
def touch(tmp_path_factory) -> str:
    """A small C program touching argv[1] MiB of heap."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler: the fork server cannot be built either")
    d = tmp_path_factory.mktemp("touch")
    (d / "touch.c").write_text(TOUCH_C)
    subprocess.run([cc, "-O1", "-o", str(d / "touch"), str(d / "touch.c")], check=True)
    return str(d / "touch")


@pytest.fixture(scope="module")
def large_perfab():
    """Make this process large, as the CLI is when it runs workloads (numpy, the store, ...)."""
    import numpy

    block = numpy.ones(150 * 1024 * 1024 // 8)  # touched: 150 MiB resident
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del block
    assert own >= 150 * MIB
    return own


def run(executor, argv):
    ex = executor.execute(list(argv), ENV, None, 30, 65536, None)
    assert ex.error is None and ex.exit_code == 0, ex
    return ex


def test_small_program_reports_its_own_small_rss(touch, large_perfab):
    with RealExecutor() as ex:
        r = run(ex, [touch, "1"])
    assert r.max_rss_kb is not None and r.max_rss_kb < 20 * MIB, (r.max_rss_kb, large_perfab)


def test_program_touching_200_mib_reports_at_least_that(touch, large_perfab):
    with RealExecutor() as ex:
        r = run(ex, [touch, "200"])
    assert r.max_rss_kb >= 200 * MIB and r.max_rss_kb < 260 * MIB


def test_rss_of_each_run_is_its_own_not_the_previous_run_s(touch, large_perfab):
    with RealExecutor() as ex:
        big, small = run(ex, [touch, "200"]), run(ex, [touch, "1"])
    assert big.max_rss_kb >= 200 * MIB and small.max_rss_kb < 20 * MIB


def test_direct_spawn_leaves_rss_out_when_it_cannot_be_the_workload_s(touch, large_perfab):
    """Spawned from perfab itself the kernel folds perfab's peak in: at or below it, max RSS is None."""
    with RealExecutor(use_helper=False) as ex:
        small, big = run(ex, [touch, "1"]), run(ex, [touch, "400"])
    assert small.max_rss_kb is None
    assert big.max_rss_kb is not None and big.max_rss_kb >= 400 * MIB


def test_cpu_time_and_wall_time_are_the_workload_s():
    script = "x = 0\nfor i in range(3_000_000): x += i"
    with RealExecutor() as ex:
        r = run(ex, [sys.executable, "-c", script])
        idle = run(ex, ["sleep", "0.2"])
    assert 0.05 < r.user_s <= r.wall_s + 0.05
    assert 0.2 <= idle.wall_s < 1.0 and idle.user_s < 0.05 and idle.nvcsw >= 1


def test_output_kept_to_the_cap_with_the_full_count():
    with RealExecutor() as ex:
        r = ex.execute(["sh", "-c", "head -c 300M /dev/zero; echo tail >&2"], ENV, None, 60, 4096, None)
    assert r.exit_code == 0 and not r.timed_out
    assert r.stdout == b"\0" * 4096 and r.stdout_bytes == 300 * 1024 * 1024
    assert r.stderr == b"tail\n" and r.stderr_tail == b"tail\n"


# A wrapper that is large itself (100 MiB touched, 0.3 s of CPU) and runs its arguments as a child.
WRAPPER = """
import subprocess, sys, time
block = bytearray(100 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
sys.exit(subprocess.run(sys.argv[1:]).returncode)
"""


def test_rusage_shim_reports_the_workload_s_rusage_under_a_large_forking_wrapper(touch, tmp_path):
    """Regression: under perf stat or a wrap, max RSS and CPU times were the wrapper's, not the workload's."""
    out = tmp_path / "rusage"
    with RealExecutor() as ex:
        r = run(ex, [sys.executable, "-c", WRAPPER, *rusage_shim([touch, "2"], out)])
        big = run(ex, [sys.executable, "-c", WRAPPER, *rusage_shim([touch, "150"], tmp_path / "big")])
    inner = read_rusage(out)
    assert r.max_rss_kb >= 100 * MIB and r.user_s + r.sys_s >= 0.3  # what wait4 sees: the wrapper's
    assert inner is not None and inner.max_rss_kb < 10 * MIB, inner  # the workload's few MiB
    assert inner.user_s + inner.sys_s < 0.1 and inner.wall_s < r.wall_s - 0.3 and inner.status == 0
    assert 150 * MIB <= read_rusage(tmp_path / "big").max_rss_kb < 200 * MIB
    assert r.stdout == b"2\n" and big.stdout == b"150\n"


STATUSES = {
    "exit 0": "exit 0",
    "exit 7": "exit 7",
    "exit 255": "exit 255",
    "SIGTERM": "kill -TERM $$",
    "SIGKILL": "kill -KILL $$",
    "SIGSEGV": "ulimit -c unlimited; kill -SEGV $$",
    "SIGABRT": "kill -ABRT $$",
}


@pytest.mark.parametrize("script", STATUSES.values(), ids=list(STATUSES))
def test_rusage_shim_passes_the_wait_status_through(script, tmp_path):
    with RealExecutor() as ex:
        bare = ex.execute(["sh", "-c", script], ENV, str(tmp_path), 10, 4096, None)
        shimmed = ex.execute(rusage_shim(["sh", "-c", script], tmp_path / "r"), ENV, str(tmp_path), 10, 4096, None)
    inner = read_rusage(tmp_path / "r")
    assert inner is not None and inner.status == bare.status
    # The shim dies of the same signal without a core dump of its own (the workload's status says whether it dumped).
    assert shimmed.status == bare.status & ~0x80
    assert shimmed.exit_code == bare.exit_code and shimmed.signal == bare.signal
    assert not any(b"perfab-exec" in core.read_bytes() for core in tmp_path.glob("core*"))  # sh's core, if any


def test_rusage_shim_that_cannot_start_its_command_says_why(tmp_path):
    out = tmp_path / "r"
    with RealExecutor() as ex:
        r = ex.execute(rusage_shim(["/nonexistent/prog"], out), ENV, None, 10, 4096, None)
    assert r.exit_code == 127 and read_rusage(out) is None
    assert r.stderr == b"perfab-exec: cannot execute '/nonexistent/prog': No such file or directory\n"


def test_read_rusage_of_a_missing_or_torn_file_is_none(tmp_path):
    assert read_rusage(tmp_path / "absent") is None
    (tmp_path / "torn").write_text("123 45")
    assert read_rusage(tmp_path / "torn") is None
