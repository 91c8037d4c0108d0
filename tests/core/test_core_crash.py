"""kill -9 of ``perfab run``: the committed runs survive and ``--resume`` completes the plan exactly."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

from core_helpers import REPO, two_sides
from perfab.plan import make_plan
from perfab.specfile import parse_spec

ENTRY = [sys.executable, "-c", "from perfab.cli import main_entry; main_entry()"]


def _committed(db) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT count(*) FROM runs").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:  # tables not created yet
        return 0


def _runs(db) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT p.seq, r.status, r.wall_s FROM runs r JOIN planned_runs p "
                           "ON p.id = r.planned_id ORDER BY p.seq").fetchall()
    finally:
        con.close()


def test_sigkill_then_resume_completes_the_plan(tmp_path):
    spec = tmp_path / "crash.toml"
    text = two_sides(runs=10, warmup=0, workload='argv = ["sleep", "0.2"]', name="crash")
    spec.write_text(text)
    db = tmp_path / "crash.db"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([*ENTRY, "run", str(spec), "--db", str(db), "--no-report"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while _committed(db) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    before = _runs(db)
    assert 4 <= len(before) < 20
    assert all(status == "ok" and wall > 0.15 for _, status, wall in before)

    done = subprocess.run([*ENTRY, "run", str(spec), "--db", str(db), "--resume", "--no-report"], env=env,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    after = _runs(db)
    plan = make_plan(parse_spec(text))
    assert len(after) == len(plan) == 20
    assert [seq for seq, _, _ in after] == list(range(20))  # no duplicates, nothing missing
    assert after[: len(before)] == before  # the runs stored before the kill are untouched
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
        assert con.execute("SELECT status FROM sessions").fetchone()[0] == "finished"
    finally:
        con.close()


def test_sigint_to_perfab_run_stops_after_the_run_in_flight(tmp_path):
    spec = tmp_path / "int.toml"
    text = two_sides(runs=10, warmup=0, workload='argv = ["sleep", "0.2"]', name="int")
    spec.write_text(text)
    db = tmp_path / "int.db"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([*ENTRY, "run", str(spec), "--db", str(db)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while _committed(db) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err.decode()
    stored = _runs(db)
    assert 3 <= len(stored) < 20 and all(status == "ok" and wall > 0.15 for _, status, wall in stored)
    assert f"interrupted after {len(stored)} runs; stored" in err.decode()
    assert "--resume" in err.decode() and "Traceback" not in err.decode()
    assert b"\nW\n" in out and b"Time elapsed" in out  # the partial report is printed
    done = subprocess.run([*ENTRY, "run", str(spec), "--db", str(db), "--resume", "--no-report"], env=env,
                          capture_output=True, timeout=60)
    assert done.returncode == 0 and [seq for seq, _, _ in _runs(db)] == list(range(20))
