"""Timeouts, interrupts and leftovers: the workload's whole process group dies, quickly."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from perfab.run.executor import RealExecutor

ENV = dict(os.environ, LC_ALL="C")


@pytest.fixture
def executor():
    with RealExecutor() as ex:
        yield ex


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not any(alive(p) for p in pids)


def test_timeout_kills_the_workload_and_its_children_quickly(executor):
    script = "sleep 60 & echo $!; sleep 60 & echo $!; echo $$; wait"
    t0 = time.monotonic()
    ex = executor.execute(["sh", "-c", script], ENV, None, 0.3, 4096, None)
    elapsed = time.monotonic() - t0
    assert ex.timed_out and ex.signal == signal.SIGKILL and ex.exit_code is None
    assert 0.25 < ex.wall_s < 1.5 and elapsed < 2.0
    pids = [int(p) for p in ex.stdout.split()]
    assert len(pids) == 3 and gone_within(pids, 2.0)


def test_timeout_with_a_child_holding_the_pipes(executor):
    """The shell exits at once but its child keeps stdout open: the watch still ends at the deadline."""
    t0 = time.monotonic()
    ex = executor.execute(["sh", "-c", "sleep 60 & echo $!"], ENV, None, 0.3, 4096, None)
    assert ex.exit_code == 0 and not ex.timed_out and time.monotonic() - t0 < 2.0
    assert gone_within([int(ex.stdout.split()[0])], 2.0)


def test_processes_left_behind_are_killed_before_the_next_run(executor):
    first = executor.execute(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], ENV, None, 10, 4096, None)
    assert first.exit_code == 0 and first.wall_s < 5
    assert gone_within([int(first.stdout)], 2.0)


def test_interrupt_kills_the_run_in_flight(executor):
    timer = threading.Timer(0.3, executor.interrupt)
    t0 = time.monotonic()
    timer.start()
    ex = executor.execute(["sh", "-c", "sleep 60; echo never"], ENV, None, 30, 4096, None)
    timer.join()
    assert ex.signal == signal.SIGKILL and not ex.timed_out and time.monotonic() - t0 < 2.0
    assert executor.execute(["sh", "-c", "exit 5"], ENV, None, 10, 4096, None).exit_code == 5


class Abandon(Exception):
    pass


def test_an_exception_in_flight_kills_the_run_and_the_next_run_still_works(executor, tmp_path):
    """A ^C without perfab's handler raises KeyboardInterrupt out of the blocking recv."""
    def handler(signum, frame):
        raise Abandon

    previous = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(Abandon):
            executor.execute(["sh", "-c", f"echo $$ >{tmp_path}/pid; exec sleep 60"], ENV, None, 30, 4096, None)
    finally:
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
    ex = executor.execute([sys.executable, "-c", "print('after')"], ENV, None, 10, 4096, None)
    assert ex.exit_code == 0 and ex.stdout == b"after\n"
    assert gone_within([int((tmp_path / "pid").read_text())], 2.0)  # the abandoned workload
