"""The workload's own rusage: max RSS is never perfab's, however large perfab is."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfab.run.executor import RealExecutor

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
