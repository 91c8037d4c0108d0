"""The perfab-exec fork server: one per executor, reused, and never left behind."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfab.run.executor import RealExecutor

ENV = dict(os.environ, LC_ALL="C")
PARENT = [sys.executable, "-c", "import os; print(os.getppid())"]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def parent_of_workload(executor: RealExecutor) -> int:
    ex = executor.execute(PARENT, ENV, None, 10, 4096, None)
    assert ex.exit_code == 0, ex
    return int(ex.stdout)


def test_no_server_before_the_first_run():
    with RealExecutor() as ex:
        assert ex.server_pid is None


def test_many_runs_share_one_server():
    with RealExecutor() as ex:
        parents = {parent_of_workload(ex) for _ in range(5)}
        for _ in range(200):
            assert ex.execute(["true"], ENV, None, 10, 4096, None).exit_code == 0
        parents.add(parent_of_workload(ex))
        assert parents == {ex.server_pid} and ex.server_pid != os.getpid()
        assert Path(f"/proc/{ex.server_pid}/comm").read_text().startswith("perfab-exec")


def test_server_is_gone_after_close_and_a_later_run_starts_another():
    ex = RealExecutor()
    first = parent_of_workload(ex)
    ex.close()
    assert ex.server_pid is None and not alive(first)
    second = parent_of_workload(ex)
    assert second != first and ex.server_pid == second
    ex.close()
    assert not alive(second)


def test_server_is_gone_after_the_executor_is_collected():
    ex = RealExecutor()
    pid = parent_of_workload(ex)
    del ex
    gc.collect()
    assert not alive(pid)


def test_a_server_killed_between_runs_is_replaced():
    with RealExecutor() as ex:
        first = parent_of_workload(ex)
        os.kill(first, signal.SIGKILL)
        assert gone_within(first, 2.0)
        second = parent_of_workload(ex)
        assert second != first and alive(second)


def test_a_server_killed_during_a_run_fails_that_run_only():
    with RealExecutor() as ex:
        pid = parent_of_workload(ex)
        killer = subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -KILL {pid}"])
        r = ex.execute(["sleep", "5"], ENV, None, 10, 4096, None)
        killer.wait()
        assert r.status is None and "perfab-exec exited during the run" in r.error
        assert ex.execute(["sh", "-c", "exit 4"], ENV, None, 10, 4096, None).exit_code == 4


PERFAB = """
import os, subprocess, sys, time
from perfab.run.executor import RealExecutor
ex = RealExecutor()
ex.execute(["true"], dict(os.environ), None, 10, 4096, None)
bystander = subprocess.Popen(["sleep", "60"])  # perfab's own child, in perfab's process group
print(ex.server_pid, bystander.pid, flush=True)
if sys.argv[1] == "busy":
    ex.execute(["sh", "-c", "echo $$ >" + sys.argv[2] + "; exec sleep 60"], dict(os.environ), None, 120, 4096, None)
time.sleep(60)
"""


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_server_exits_when_perfab_is_killed_and_kills_nothing_else(tmp_path, state):
    pidfile = tmp_path / "workload.pid"
    perfab = subprocess.Popen([sys.executable, "-c", PERFAB, state, str(pidfile)], stdout=subprocess.PIPE,
                              start_new_session=True)
    try:
        server, bystander = (int(p) for p in perfab.stdout.readline().split())
        deadline = time.monotonic() + 10
        while state == "busy" and not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        workload = int(pidfile.read_text()) if state == "busy" else None
        perfab.kill()
        perfab.wait()
        assert gone_within(server, 2.0)
        if workload is not None:
            assert gone_within(workload, 2.0)  # the run in flight dies with perfab
        assert alive(bystander)  # the server killed nothing else
    finally:
        perfab.kill()
        perfab.wait()
        perfab.stdout.close()
        os.killpg(perfab.pid, signal.SIGKILL)  # the bystander, now that it was seen alive


def test_no_descriptor_leaks_in_perfab_or_the_server():
    with RealExecutor() as ex:
        parent_of_workload(ex)
        ours, theirs = len(os.listdir("/proc/self/fd")), len(os.listdir(f"/proc/{ex.server_pid}/fd"))
        for _ in range(50):
            ex.execute(["sh", "-c", "echo out; echo err >&2"], ENV, None, 10, 4096, None)
            ex.execute(["./nope"], ENV, None, 10, 4096, None)
        assert len(os.listdir("/proc/self/fd")) == ours
        assert len(os.listdir(f"/proc/{ex.server_pid}/fd")) == theirs
        fds = ex.execute(["ls", "/proc/self/fd"], ENV, None, 10, 4096, None).stdout.split()
        assert sorted(fds) == [b"0", b"1", b"2", b"3"]  # ls's own directory handle is the 3


NO_COMPILER = """
import os, resource
from perfab.run.executor import RealExecutor
big = b"x" * (100 << 20)
with RealExecutor() as ex:
    r = ex.execute(["/bin/sh", "-c", "exit 6"], {}, None, 10, 4096, None)
    print(ex.server_pid, r.exit_code, r.max_rss_kb)
"""


def test_without_a_compiler_workloads_are_spawned_directly(tmp_path):
    env = dict(ENV, XDG_CACHE_HOME=str(tmp_path), CC="/nonexistent/cc", PATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", NO_COMPILER], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "6", "None"]  # no server; max RSS cannot be the workload's
    assert not list(tmp_path.glob("perfab/perfab-exec-*"))
