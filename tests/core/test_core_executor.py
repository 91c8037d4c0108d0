"""RealExecutor on real processes: timeouts, output caps, signals, pinning, rusage, leftovers."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from core_helpers import fake_runner, runs_table, two_sides
from perfab.errors import PerfabError
from perfab.run.executor import FakeExecutor, FakeOutcome, RealExecutor
from perfab.run.runner import Runner
from perfab.run.backends import TimeBackend
from perfab.specfile import parse_spec
from perfab.store import Store

ENV = dict(os.environ, LC_ALL="C")


def _run(argv, timeout_s=10.0, cap=65536, cpus=None, cwd=None):
    return RealExecutor().execute(list(argv), ENV, cwd, timeout_s, cap, cpus)


def test_timeout_kills_quickly():
    t0 = time.monotonic()
    ex = _run(["sleep", "5"], timeout_s=0.3)
    elapsed = time.monotonic() - t0
    assert ex.timed_out and ex.signal == signal.SIGKILL and ex.exit_code is None
    assert 0.25 < ex.wall_s < 1.5 and elapsed < 2.0


def test_large_stdout_kept_to_cap_with_full_count():
    ex = _run(["sh", "-c", "head -c 300M /dev/zero"], timeout_s=60, cap=4096)
    assert ex.exit_code == 0 and not ex.timed_out
    assert ex.stdout == b"\0" * 4096
    assert ex.stdout_bytes == 300 * 1024 * 1024


def test_non_utf8_output_verbatim_and_decoded_with_replacement(db):
    script = ("import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe raw'); "
              "sys.stderr.buffer.write(b'bad \\xc3\\x28'); sys.exit(4)")
    ex = _run([sys.executable, "-c", script])
    assert ex.stdout == b"ok \xff\xfe raw" and ex.stderr == b"bad \xc3\x28"
    text = two_sides(runs=1, warmup=0, workload=f'argv = ["{sys.executable}", "-c", "{_toml(script)}"]')
    exp = parse_spec(text)
    with Store(db) as store:
        Runner(exp, store, TimeBackend(), RealExecutor(), {}).run()
        rows = runs_table(db)
        assert rows[0][3] == "failed" and rows[0][4] == "exit status 4: bad \ufffd("
        run_id = store.run_rows("t")[0]["run_id"]
        assert store.output(run_id) == (b"ok \xff\xfe raw", b"bad \xc3\x28")


def _toml(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def test_missing_binary_is_an_error_text():
    ex = _run(["/nonexistent/prog", "x"])
    assert ex.status is None and ex.error is not None
    assert "/nonexistent/prog" in ex.error and "No such file" in ex.error


def test_sigsegv_is_signal_11():
    ex = _run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert ex.signal == 11 and ex.exit_code is None and not ex.timed_out


def test_pinning_is_seen_by_the_workload(db):
    before = os.sched_getaffinity(0)
    cpu = min(before)
    text = two_sides(f'pin = "{cpu}"', runs=1, warmup=0,
                     workload=f'argv = ["{sys.executable}", "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]')
    with Store(db) as store:
        Runner(parse_spec(text), store, TimeBackend(), RealExecutor(), {}).run()
        for row in store.run_rows("t"):
            assert store.output(row["run_id"])[0] == f"[{cpu}]\n".encode()
    assert os.sched_getaffinity(0) == before  # perfab itself is not left pinned


def test_busy_loop_user_time_and_rss():
    script = ("b = bytearray(200 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
              "x = 0\nfor i in range(3_000_000): x += i")
    ex = _run([sys.executable, "-c", script])
    assert ex.exit_code == 0
    assert 0.05 < ex.user_s <= ex.wall_s + 0.05
    assert ex.max_rss_kb >= 200 * 1024  # the 200 MiB the workload touched


def test_rss_of_a_small_workload_is_never_perfab_s_own():
    """Linux folds the spawner's RSS high-water mark into the child's maxrss at exec."""
    import numpy  # noqa: F401 - makes this process large, as the CLI is when it runs workloads
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ex = _run(["sleep", "0.01"])
    assert own > 40 * 1024
    assert ex.max_rss_kb is None or ex.max_rss_kb < 20 * 1024, (ex.max_rss_kb, own)


def test_processes_left_behind_are_killed():
    ex = _run(["sh", "-c", "sleep 100 & echo $!"], timeout_s=10)
    assert ex.exit_code == 0 and ex.wall_s < 5
    pid = int(ex.stdout.split()[0])
    deadline = time.monotonic() + 3
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


def test_cwd_and_env_reach_the_workload(tmp_path):
    env = dict(ENV, PERFAB_TEST_MARK="m42")
    ex = RealExecutor().execute(["sh", "-c", "pwd; echo $PERFAB_TEST_MARK"], env, str(tmp_path), 10, 4096, None)
    assert ex.stdout.decode().split() == [str(tmp_path), "m42"]


def test_shell_workload_exit_status_is_the_reason(db):
    text = two_sides(runs=1, warmup=0, workload='argv = "echo oops >&2; exit 3"\nshell = true')
    with Store(db) as store:
        Runner(parse_spec(text), store, TimeBackend(), RealExecutor(), {}).run()
    assert [r[3:] for r in runs_table(db)] == [("failed", "exit status 3: oops")] * 2


def test_second_sigint_kills_a_real_run_in_flight(db):
    import threading

    text = two_sides(runs=2, warmup=0, workload='argv = ["sleep", "5"]')
    timers = [threading.Timer(t, os.kill, (os.getpid(), signal.SIGINT)) for t in (0.3, 0.6)]
    with Store(db) as store:
        runner = Runner(parse_spec(text), store, TimeBackend(), RealExecutor(), {})
        t0 = time.monotonic()
        for timer in timers:
            timer.start()
        result = runner.run()
        elapsed = time.monotonic() - t0
    assert result.status == "interrupted" and elapsed < 3
    assert [r[3:] for r in runs_table(db)] == [("interrupted", "abandoned at SIGINT")]


def test_fake_executor_times_out_like_the_real_one():
    """Regression: a fake run longer than its timeout came back finished, unlike a real one."""
    real = _run(["sleep", "5"], timeout_s=0.3)
    fake = FakeExecutor().execute(["sleep", "5"], ENV, None, 0.3, 4096, None)
    for ex in (real, fake):
        assert ex.timed_out and ex.signal == signal.SIGKILL and ex.exit_code is None and ex.error is None
        assert ex.wall_s == pytest.approx(0.3, abs=0.15) and ex.user_s <= ex.wall_s
    assert fake.wall_s == 0.3
    within = FakeExecutor().execute(["sleep", "0.2"], ENV, None, 0.3, 4096, None)
    assert not within.timed_out and within.exit_code == 0 and within.wall_s == 0.2


def test_fake_timeouts_reach_the_store_as_timeouts(db):
    text = two_sides(runs=2, warmup=0, workload='argv = ["sleep", "9"]\ntimeout = 2')
    runner, ex, store = fake_runner(text, db, lambda argv, env: FakeOutcome(wall_s=9.0, stdout=b"late\n"))
    with store:
        with pytest.raises(PerfabError, match="aborted after 4 failed runs"):
            runner.run()
    assert {r[3:] for r in runs_table(db)} == {("failed", "timed out after 2 s")}
