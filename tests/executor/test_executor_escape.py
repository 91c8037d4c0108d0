"""Processes that leave the workload's session: killed after the run, never holding up the next one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfab.run.executor import GRACE_S, RealExecutor

ENV = dict(os.environ, LC_ALL="C")
TIMEOUT_S = 2.0

# Each prints the pid of a process that left the workload's session and still holds its stdout.
ESCAPES = {
    # setsid(1) in a background job: not a group leader, so it calls setsid() and execs sleep itself.
    "setsid": ["sh", "-c", "setsid sleep 1000 & echo $!; sleep 0.2"],
    # Popen returns once the child has called setsid and exec'd.
    "new session": [sys.executable, "-c",
                    "import subprocess; print(subprocess.Popen(['sleep', '1000'], start_new_session=True).pid)"],
    # A daemon: fork, setsid, fork again, the middle process exits; the grandchild is orphaned.
    "daemon": [sys.executable, "-c", """
import os
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        os.execvp("sleep", ["sleep", "1000"])
    os._exit(0)
os.close(w)
print(os.read(r, 32).decode(), flush=True)
"""],
}


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def timed(executor, argv, timeout_s=TIMEOUT_S):
    t0 = time.monotonic()
    ex = executor.execute(list(argv), ENV, None, timeout_s, 4096, None)
    return ex, time.monotonic() - t0


def three_runs(executor, escape):
    """The escaping run, a run that times out, a run with output: each checked on its own."""
    executor.execute(["true"], ENV, None, TIMEOUT_S, 4096, None)  # untimed: building the helper, starting it
    cpu0 = time.process_time()
    first, first_s = timed(executor, escape)
    assert first.exit_code == 0 and not first.timed_out and first_s < first.wall_s + GRACE_S + 0.5, (first, first_s)
    escaped = int(first.stdout.split()[0])
    slow, slow_s = timed(executor, ["sleep", "10"])
    assert slow.timed_out and slow.signal == signal.SIGKILL and slow.stdout == b""
    assert TIMEOUT_S - 0.1 < slow.wall_s < TIMEOUT_S + 1 and TIMEOUT_S - 0.1 < slow_s < TIMEOUT_S + 1
    third, third_s = timed(executor, ["echo", "third"])
    assert third.exit_code == 0 and third.stdout == b"third\n" and third_s < 1.0
    assert time.process_time() - cpu0 < 0.5  # perfab slept while it waited
    return escaped


@pytest.mark.parametrize("how", ESCAPES)
def test_escaped_child_holding_stdout_neither_delays_nor_disturbs_later_runs(how):
    """Regression: the next run's timeout fired ~35 s late, a CPU spun, and outputs went to the wrong run."""
    with RealExecutor() as executor:
        escaped = three_runs(executor, ESCAPES[how])
        assert not alive(escaped)  # killed and reaped before the run was reported
        assert children(executor.server_pid) == []  # nothing left below the server


def test_timeout_kills_children_that_left_the_session():
    script = ("import subprocess, time\n"
              "print(subprocess.Popen(['sleep', '1000'], start_new_session=True).pid, flush=True)\n"
              "time.sleep(60)\n")
    with RealExecutor() as executor:
        ex, elapsed = timed(executor, [sys.executable, "-c", script], timeout_s=1.0)
        assert ex.timed_out and 0.9 < elapsed < 2.0
        assert not alive(int(ex.stdout)) and children(executor.server_pid) == []


def test_direct_spawn_an_escaped_writer_cannot_hold_the_run():
    """Without the server the escaped process is out of reach, but the pipes are let go after GRACE_S."""
    with RealExecutor(use_helper=False) as executor:
        escaped = three_runs(executor, ESCAPES["new session"])
    try:
        assert alive(escaped)  # the limit of spawning directly, stated
    finally:
        try:
            os.kill(escaped, signal.SIGKILL)
        except ProcessLookupError:
            pass


PERFAB = """
import os, sys
from perfab.run.executor import RealExecutor
ex = RealExecutor()
script = ("import subprocess, time; "
          "print(subprocess.Popen(['sleep', '1000'], start_new_session=True).pid, flush=True); time.sleep(60)")
print(os.getpid(), flush=True)
ex.execute([sys.executable, "-c", script], dict(os.environ), None, 120, 4096, None)
"""


def test_a_killed_perfab_takes_the_escaped_children_of_its_run_along(tmp_path):
    pidfile = tmp_path / "escaped"
    script = PERFAB.replace("flush=True); time", f"file=open({str(pidfile)!r}, 'w'), flush=True); time")
    perfab = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True)
    try:
        perfab.stdout.readline()
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.02)
        escaped = int(pidfile.read_text())
        assert alive(escaped)
        perfab.kill()
        perfab.wait()
        deadline = time.monotonic() + 2
        while alive(escaped) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(escaped)
    finally:
        perfab.kill()
        perfab.wait()
        perfab.stdout.close()
