"""Interruptions of a real ``perfab run`` process: signals, resumes, and a second runner.

Each case stops a session the way a user or a machine does (Ctrl-C, kill,
a closed terminal) and checks the exit code, the one line that says how to
continue (with ``--db``), the session's status, and that the stored runs
stay exactly as they were through the resume that finishes the plan.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reliability_helpers import SRC, cli, runs_of, sessions_of, stored_rows, two_sides, write

ENTRY = "from perfab.cli import main_entry; main_entry()"


def start(spec: Path, db: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", ENTRY, "run", str(spec), "--db", str(db), "--no-report", *extra],
                            env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def wait_for_runs(db: Path, n: int, proc: subprocess.Popen, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if db.exists() and proc.poll() is None:
            try:
                if len(runs_of(db)) >= n:
                    return
            except Exception:  # the schema is still being created
                pass
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} runs stored in {limit} s")


def interrupted(spec: Path, db: Path) -> Path:
    """``db`` holding a session of ``spec`` stopped by SIGINT after two runs."""
    proc = start(spec, db)
    wait_for_runs(db, 2, proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    return db


@pytest.fixture
def slow_spec(tmp_path) -> Path:
    return write(tmp_path / "slow.toml", two_sides(workload='argv = ["sleep", "0.3"]', runs=6, name="slow"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_stops_the_session_keeps_its_runs_and_resume_finishes_it(tmp_path, slow_spec, sig):
    """Stopped mid-session: exit 130, the resume command with --db, status interrupted; --resume then completes
    the plan and every run stored before the signal is still there, unchanged."""
    db = tmp_path / "r.db"
    proc = start(slow_spec, db)
    wait_for_runs(db, 3, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    err = err.decode()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert f"perfab run {slow_spec} --resume --db {db}" in err.strip().splitlines()[-1]
    assert sessions_of(db) == [(1, "interrupted")]
    before = stored_rows(db)
    out = cli("run", slow_spec, "--db", db, "--resume", "--no-report")
    assert out.code == 0, out.err
    after = stored_rows(db)
    assert all(row in after for row in before)  # nothing stored was changed or lost
    assert sessions_of(db) == [(1, "finished")]
    assert sorted(r[0] for r in runs_of(db) if r[3] == "ok" and not r[2]) == sorted(
        {r[0] for r in runs_of(db) if not r[2]}) and len({r[0] for r in runs_of(db) if not r[2]}) == 12


def test_resume_with_nothing_to_resume(tmp_path):
    """--resume when the experiment's last session finished: one line, exit 2, nothing stored."""
    spec = write(tmp_path / "s.toml", two_sides(name="done"))
    db = tmp_path / "r.db"
    assert cli("run", spec, "--db", db, "--no-report").code == 0
    before = stored_rows(db)
    out = cli("run", spec, "--db", db, "--resume", "--no-report")
    out.one_line_error(2, r"^perfab: experiment 'done' has no unfinished session to resume; run it without --resume$")
    assert stored_rows(db) == before


def test_a_second_runner_is_refused_while_the_first_runs(tmp_path, slow_spec):
    """Two `perfab run --resume` on one session: the second is refused naming the first's pid; the first goes on."""
    db = interrupted(slow_spec, tmp_path / "r.db")
    resumer = start(slow_spec, db, "--resume")
    try:
        wait_for_runs(db, len(runs_of(db)) + 1, resumer)
        out = cli("run", slow_spec, "--db", db, "--resume", "--no-report")
        assert out.code != 0 and "Traceback" not in out.err
        assert f"pid {resumer.pid}" in out.err, out.err
        _, err = resumer.communicate(timeout=120)
        assert resumer.returncode == 0, err.decode()
    finally:
        if resumer.poll() is None:
            resumer.kill()
    seqs = [r[0] for r in runs_of(db) if r[3] == "ok"]
    assert len(seqs) == len(set(seqs))  # no planned run was measured twice


def test_new_session_beside_an_unfinished_one(tmp_path, slow_spec):
    """--new-session while a session is unfinished: a second session runs; the first keeps its runs."""
    db = interrupted(slow_spec, tmp_path / "r.db")
    before = stored_rows(db)
    fast = write(tmp_path / "slow2.toml", two_sides(workload='argv = ["true"]', runs=2, name="slow"))
    out = cli("run", fast, "--db", db, "--new-session", "--no-report")
    assert out.code == 0, out.err
    assert [s for s, _ in sessions_of(db)] == [1, 2] and sessions_of(db)[1][1] == "finished"
    assert all(row in stored_rows(db) for row in before)


def test_run_without_resume_while_a_session_is_unfinished(tmp_path, slow_spec):
    """A plain `run` when the last session was interrupted: refused in one line offering --resume or --new-session."""
    db = interrupted(slow_spec, tmp_path / "r.db")
    before = stored_rows(db)
    out = cli("run", slow_spec, "--db", db, "--no-report")
    out.one_line_error(2, r"--resume.*--new-session|--new-session.*--resume")
    assert stored_rows(db) == before


def test_sigterm_stops_the_service_and_its_children(tmp_path):
    """SIGTERM while a service runs: perfab exits 130 and nothing of the service (nor its setsid child) survives."""
    pidfile = tmp_path / "svc.pid"
    server = write(tmp_path / "server.py", f"""
import os, socket, subprocess, sys, time
child = subprocess.Popen(["setsid", "sleep", "120"])
open({str(pidfile)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
while True:
    c, _ = s.accept(); c.close()
""")
    import socket as _s
    with _s.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = write(tmp_path / "svc.toml", two_sides(workload='argv = ["sleep", "0.3"]', runs=6, name="svc",
                 extra=f'\n[workload.service]\nargv = ["{sys.executable}", "{server}", "{port}"]\nport = {port}\n'))
    db = tmp_path / "r.db"
    proc = start(spec, db)
    wait_for_runs(db, 2, proc)
    pids = [int(p) for p in pidfile.read_text().split()]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    time.sleep(0.5)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert sessions_of(db) == [(1, "interrupted")]
