"""The store never loses or overwrites a run, and read-only commands never write.

Mount-based tests (a read-only filesystem, a full one) need root and a
kernel that lets it mount tmpfs; they skip with the reason otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core_helpers import FakeOutcome, cli, fake_runner, runs_table, two_sides
from perfab.errors import StoreError
from perfab.store import Store
from perfab.store.schema import MIGRATIONS, SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _interrupted_session(db: Path) -> int:
    """A session stopped after 3 of 12 runs (a SIGINT), claim released."""
    calls = [0]

    def behaviour(argv, env):
        calls[0] += 1
        if calls[0] == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return FakeOutcome(wall_s=0.1)

    runner, _, store = fake_runner(two_sides(runs=5, warmup=1), db, behaviour)
    result = runner.run()
    store.close()
    assert result.status == "interrupted"
    return result.session


_HOLDER = textwrap.dedent("""
    import sys, time
    from perfab.store import Store
    store = Store(sys.argv[1])
    store.claim(int(sys.argv[2]), takeover=sys.argv[3] == "takeover")
    print("claimed", flush=True)
    time.sleep(60)
""")


def _hold(db: Path, session: int, takeover: bool = False) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(db), str(session),
                             "takeover" if takeover else "wait"], stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.stdout.readline().strip() == b"claimed"
    return proc


def test_a_second_resume_is_refused_naming_the_holder(db):
    """Two `--resume` at once both ran the rest of the plan and overwrote each other's runs."""
    session = _interrupted_session(db)
    holder = _hold(db, session)
    try:
        before = runs_table(db)
        runner, ex, store = fake_runner(two_sides(runs=5, warmup=1), db)
        with pytest.raises(StoreError) as info:
            runner.run(resume=True)
        message = str(info.value)
        assert f"session {session} is being run by pid {holder.pid}" in message and "\n" not in message
        assert ex.calls == [] and runs_table(db) == before
        store.close()
    finally:
        holder.kill()
        holder.wait()
    # The holder is gone (kill -9): its claim no longer holds and the session can be resumed.
    runner, ex, store = fake_runner(two_sides(runs=5, warmup=1), db)
    assert runner.run(resume=True).status == "finished"
    assert len(ex.calls) == 12 - 3
    store.close()


def test_a_runner_that_lost_its_claim_stores_nothing_more(db):
    session = _interrupted_session(db)
    taken = []

    def behaviour(argv, env):
        if not taken:  # another runner takes the session over while this one runs
            taken.append(_hold(db, session, takeover=True))
        return FakeOutcome(wall_s=0.1)

    runner, _, store = fake_runner(two_sides(runs=5, warmup=1), db, behaviour)
    try:
        before = len(runs_table(db))
        with pytest.raises(StoreError, match="no longer this runner's"):
            runner.run(resume=True, takeover=True)
        assert len(runs_table(db)) == before
    finally:
        for proc in taken:
            proc.kill()
            proc.wait()
        store.close()


def test_cli_resume_refusal_is_one_line(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(two_sides(runs=5, warmup=1, workload='argv = ["true"]'))
    db = tmp_path / "r.db"
    session = _interrupted_session(db)
    con = sqlite3.connect(db)  # the same experiment name and spec text, so --resume finds the session
    con.execute("UPDATE sessions SET spec_text = ?", (spec.read_text(),))
    con.commit()
    con.close()
    holder = _hold(db, session)
    try:
        code, out, err = cli("run", str(spec), "--db", str(db), "--resume")
    finally:
        holder.kill()
        holder.wait()
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert f"is being run by pid {holder.pid}" in err


def _foreign(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.execute("INSERT INTO invoices VALUES (1, 9.5)")
    con.commit()
    con.close()


@pytest.mark.parametrize("command", ["report", "list", "run"])
def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path, command):
    """`perfab report` on someone else's SQLite file added perfab's tables to it."""
    path = tmp_path / "accounts.db"
    _foreign(path)
    before = _digest(path)
    spec = tmp_path / "s.toml"
    spec.write_text(two_sides(runs=1, warmup=0, workload='argv = ["true"]'))
    argv = ["run", str(spec)] if command == "run" else [command]
    code, out, err = cli(*argv, "--db", str(path))
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert "not a perfab results database" in err and "invoices" in err
    assert _digest(path) == before
    assert not Path(f"{path}-wal").exists()


def test_report_and_list_do_not_write_a_perfab_database(db):
    runner, _, store = fake_runner(two_sides(runs=3, warmup=0), db)
    runner.run()
    store.close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = _digest(db)
    for argv in (["report"], ["list"], ["report", "--format", "json"]):
        code, _, err = cli(*argv, "--db", str(db))
        assert code == 0, err
    assert _digest(db) == before


def _v1_database(path: Path) -> None:
    """A results file as schema 1 wrote it: one session of two sides, two runs each, rusage samples."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
                "applied_at REAL NOT NULL)")
    con.executescript(MIGRATIONS[0][2])
    con.execute("INSERT INTO migrations VALUES (1, 'initial schema', 0)")
    con.execute("PRAGMA user_version = 1")
    spec = two_sides(runs=2, warmup=0, workload='argv = ["true"]', name="old")
    con.execute("INSERT INTO experiments VALUES (1, 'old', 0)")
    con.execute("INSERT INTO sessions VALUES (1, 1, 0, 1, 'finished', NULL, 's.toml', ?, 'h', 'time', "
                "'[[]]', '{}')", (spec,))
    for seq, variant in enumerate("abba"):
        con.execute("INSERT INTO planned_runs VALUES (?, 1, ?, 'w', ?, 0, 0, 0)", (seq + 1, seq, variant))
        con.execute("INSERT INTO runs (id, planned_id, started_at, status, wall_s, timed_out) "
                    "VALUES (?, ?, 0, 'ok', 1, 0)", (seq + 1, seq + 1))
        wall = 1.0 if variant == "a" else 2.0
        con.executemany("INSERT INTO samples VALUES (?, ?, ?)",
                        [(seq + 1, "wall_s", wall + seq / 100), (seq + 1, "self.cycles:u.main", 50.0)])
    con.execute("INSERT INTO metric_meta VALUES (1, 'w', 'wall_s', 's', 0, 0)")
    con.commit()
    con.close()


def test_an_older_database_is_reported_read_only_and_migrated_only_when_written(tmp_path):
    path = tmp_path / "v1.db"
    _v1_database(path)
    before = _digest(path)
    code, out, err = cli("report", "old", "--db", str(path), "--format", "json")
    assert code == 0, err
    assert _digest(path) == before  # migrated in memory only
    wall = next(r for r in json.loads(out)["rows"] if r["metric"] == "wall_s")
    assert wall["base_values"] == [1.0, 1.03] and wall["exp_values"] == [2.01, 2.02]
    with Store(path) as store:  # a writer migrates the file itself
        data = store.load("old")
        assert {r.attempt for r in data.runs} == {1}
        assert data.profiles[1] == {"self.cycles:u.main": 50.0}
        assert all("self.cycles:u.main" not in v for v in data.values.values())
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    con.close()


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True)
    return done.returncode == 0


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_an_archived_database_on_a_read_only_filesystem_is_reported(db, tmp_path):
    runner, _, store = fake_runner(two_sides(runs=3, warmup=0), db)
    runner.run()
    store.close()
    code, expected, _ = cli("report", "--db", str(db))
    archive = tmp_path / "archive"
    if not _mount_tmpfs(archive, "8m"):
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    try:
        shutil.copy(db, archive / "results.db")  # WAL mode, without its -wal file
        subprocess.run(["mount", "-o", "remount,ro", str(archive)], check=True)
        code, out, err = cli("report", "--db", str(archive / "results.db"))
        assert code == 0, err
        assert out == expected
        code, out, err = cli("list", "--db", str(archive / "results.db"))
        assert code == 0 and "t " in out
    finally:
        _umount(archive)


def test_a_full_disk_stops_the_session_with_one_line_and_keeps_what_was_stored(tmp_path):
    disk = tmp_path / "small"
    if not _mount_tmpfs(disk, "400k"):
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    try:
        spec = tmp_path / "s.toml"
        big = "x" * 60_000
        spec.write_text(two_sides(runs=200, warmup=0, workload=f'argv = ["/bin/echo", "{big}"]\ntimeout = 10'))
        db = disk / "r.db"
        code, out, err = cli("run", str(spec), "--db", str(db))
        assert code == 1 and "Traceback" not in err
        assert "the disk is full" in err.splitlines()[-1] and "--resume" in err.splitlines()[-1]
        stored = runs_table(db)
        assert stored and all(r[3] == "ok" for r in stored)
        code, out, err = cli("report", "--db", str(db))
        if {r[1] for r in stored if not r[2]} == {"a", "b"}:
            assert code == 0, err
        else:  # the disk filled before both sides had a run: the report says there is nothing to compare
            assert code == 1 and err.startswith("perfab: no comparison for workload 'w'"), err
    finally:
        _umount(disk)


def test_a_corrupted_database_is_one_line(db):
    runner, _, store = fake_runner(two_sides(runs=2, warmup=0), db)
    runner.run()
    store.close()
    data = bytearray(db.read_bytes())
    data[100:4096] = os.urandom(3996)  # the schema page, after the header
    db.write_bytes(bytes(data))
    for argv in (["report"], ["list"]):
        code, out, err = cli(*argv, "--db", str(db))
        assert code == 1 and out == "" and len(err.splitlines()) == 1, err
        assert "not a usable perfab database" in err


def test_a_stale_claim_of_a_dead_runner_does_not_block_resume(db):
    session = _interrupted_session(db)
    proc = _hold(db, session)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.05)
    runner, ex, store = fake_runner(two_sides(runs=5, warmup=1), db)
    assert runner.run(resume=True).status == "finished"
    store.close()


def test_a_session_of_another_machine_is_never_resumed_here(db):
    """In a shared store, --resume must not pick up a session another machine left unfinished."""
    session = _interrupted_session(db)
    con = sqlite3.connect(db)
    con.execute("UPDATE sessions SET host = 'lab-machine-7' WHERE id = ?", (session,))
    con.commit()
    con.close()
    runner, ex, store = fake_runner(two_sides(runs=5, warmup=1), db)
    with pytest.raises(Exception) as info:
        runner.run(resume=True)
    assert "no unfinished session to resume" in str(info.value) and ex.calls == []
    assert runner.run().status == "finished"  # a new session of this machine is not blocked by it
    store.close()
