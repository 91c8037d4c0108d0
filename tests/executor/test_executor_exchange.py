"""A run through the fork server is one request and one reply: output, limits and readings come back with it."""

from __future__ import annotations

import os
import signal
import threading
import time

from perfab.run.executor import RealExecutor
from perfab.run.trampoline import TAIL_BYTES

ENV = dict(os.environ, LC_ALL="C")


def test_stderr_cut_at_the_cap_keeps_its_end_and_counts_every_byte():
    script = "head -c 100000 /dev/zero >&2; printf 'the last words' >&2; echo out"
    with RealExecutor() as ex:
        r = ex.execute(["sh", "-c", script], ENV, None, 30, 4096, None)
    assert r.exit_code == 0 and r.stdout == b"out\n" and r.stdout_bytes == 4
    assert r.stderr == b"\0" * 4096 and r.stderr_bytes == 100014
    assert len(r.stderr_tail) == TAIL_BYTES and r.stderr_tail.endswith(b"\0the last words")


def test_interrupt_kills_the_run_in_flight_and_a_late_one_changes_nothing():
    """The second ^C reaches the run through the server's socket; one that comes after the run is skipped."""
    with RealExecutor() as ex:
        assert ex.execute(["true"], ENV, None, 30, 4096, None).exit_code == 0
        timer = threading.Timer(0.3, ex.interrupt)
        timer.start()
        t0 = time.monotonic()
        r = ex.execute(["sleep", "30"], ENV, None, 60, 4096, None)
        timer.join()
        assert r.signal == signal.SIGKILL and not r.timed_out and time.monotonic() - t0 < 5
        server = ex.server_pid
        ex._server.in_flight = True  # a kill word that arrives once the run is over (the race a ^C can lose)
        ex.interrupt()
        ex._server.in_flight = False
        after = ex.execute(["sh", "-c", "echo still here"], ENV, None, 30, 4096, None)
        assert after.exit_code == 0 and after.stdout == b"still here\n" and ex.server_pid == server


def test_the_run_carries_the_machines_cpu_counters_around_it():
    with RealExecutor() as ex:
        r = ex.execute(["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], ENV, None, 60, 4096, None)
    w = r.window
    assert w is not None and w.after.total_s >= w.before.total_s and w.after.busy_s >= w.before.busy_s
    assert w.after.busy_s - w.before.busy_s >= 0.5 * (r.user_s + r.sys_s) - 0.02  # the run's own CPU time is in it
    assert 0 <= w.harness_s < 0.05  # perfab slept in one recv, the server in poll


def test_without_the_server_perfab_reads_the_counters_itself():
    with RealExecutor(use_helper=False) as ex:
        r = ex.execute(["true"], ENV, None, 10, 4096, None)
    assert r.exit_code == 0 and r.window is not None and r.window.after.total_s >= r.window.before.total_s
