"""Hostile results databases: each gets one line naming the file and the fix, and no stored byte changes.

Read-only commands (report, list, history) never write or migrate; a
command that cannot use a file says so without touching it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reliability_helpers import cli, file_digest, runs_of, sessions_of, stored_db, two_sides, write

READERS = [("report",), ("list",), ("history",)]
NOT_PERFAB = r"not a perfab results database \(its tables \(t\) are not perfab's\); pass the --db of a perfab"
NOT_A_DB = r"not a usable perfab database \(file is not a database\); pass another --db PATH"


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    return stored_db(tmp_path_factory.mktemp("kept"))


@pytest.fixture
def spec_file(tmp_path) -> Path:
    return write(tmp_path / "s.toml", two_sides(name="kept"))


def foreign(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (42)")
    con.commit()
    con.close()
    return path


def refused_unchanged(path: Path, code: int, pattern: str, *argv: str) -> None:
    before = file_digest(path)
    cli(*argv, "--db", path).one_line_error(code, pattern)
    assert file_digest(path) == before


@pytest.mark.parametrize("argv", READERS + [("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_foreign_sqlite_file_is_refused_and_left_alone(tmp_path, spec_file, argv):
    """Another program's SQLite database: no perfab table is added to it, by any command."""
    db = foreign(tmp_path / "other.db")
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    refused_unchanged(db, 1, NOT_PERFAB, *argv)
    con = sqlite3.connect(db)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["t"]
    con.close()


@pytest.mark.parametrize("argv", READERS, ids=lambda a: a[0])
def test_empty_file_is_not_a_results_database_for_readers(tmp_path, argv):
    """A 0-byte file (touch) read by report/list/history: refused, still 0 bytes."""
    db = write(tmp_path / "empty.db", b"")
    refused_unchanged(db, 1, r"not a perfab results database \(it holds no tables\)", *argv)
    assert db.stat().st_size == 0


def test_empty_file_becomes_a_results_database_for_run(tmp_path, spec_file):
    """`run --db` on a 0-byte file (an empty SQLite database) creates the schema and stores the session."""
    db = write(tmp_path / "empty.db", b"")
    assert cli("run", spec_file, "--db", db, "--no-report").code == 0
    assert sessions_of(db) == [(1, "finished")] and len(runs_of(db)) == 4


@pytest.mark.parametrize("content", ["random", "text", "elf", "png-header"])
@pytest.mark.parametrize("argv", [("report",), ("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_file_that_is_not_sqlite_is_refused_unchanged(tmp_path, spec_file, content, argv):
    """Bytes that are not a database at all: one line, the file as it was."""
    data = {"random": bytes(range(256)) * 20, "text": b"name,value\nx,1\n" * 50,
            "elf": Path(sys.executable).resolve().read_bytes()[:8192], "png-header": b"\x89PNG\r\n\x1a\n" + b"\0" * 600}
    db = write(tmp_path / "r.db", data[content])
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    refused_unchanged(db, 1, NOT_A_DB, *argv)


@pytest.mark.parametrize("argv", READERS + [("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_truncated_database_is_refused(tmp_path, kept, spec_file, argv):
    """A results file cut in half (a copy interrupted): malformed, said in one line, by readers and run alike."""
    data = kept.read_bytes()
    db = write(tmp_path / "half.db", data[: len(data) // 2])
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    refused_unchanged(db, 1, r"not a usable perfab database \(database disk image is malformed\)", *argv)


@pytest.mark.parametrize("argv", [("report",), ("list",), ("history",), ("report", "--format", "json"),
                                  ("run", "SPEC", "--no-report")], ids="-".join)
def test_database_with_a_damaged_page_names_the_check_to_run(tmp_path, kept, spec_file, argv):
    """A page in the middle overwritten: the first query meeting it gives one line with the integrity check."""
    data = bytearray(kept.read_bytes())
    page = 4096
    assert len(data) > 3 * page
    data[2 * page: 3 * page] = bytes([0xA5]) * page
    db = write(tmp_path / "damaged.db", bytes(data))
    before = file_digest(db)
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    out = cli(*argv, "--db", db)
    if out.code == 0:  # the damaged page held nothing this command reads
        assert file_digest(db) == before
        return
    out.one_line_error(1, r"(malformed|not a database).*(PRAGMA integrity_check|pass another --db)")
    assert file_digest(db) == before


@pytest.mark.parametrize("argv", [("report",), ("list",), ("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_directory_given_as_database(tmp_path, spec_file, argv):
    """--db pointing at a directory: usage error, exit 2."""
    (tmp_path / "dir.db").mkdir()
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    cli(*argv, "--db", tmp_path / "dir.db").one_line_error(2, r"dir\.db: is a directory; pass the path of a results")


@pytest.mark.parametrize("argv", READERS, ids=lambda a: a[0])
def test_reader_on_a_path_in_a_missing_directory_creates_nothing(tmp_path, argv):
    """report/list/history on a database that does not exist: exit 2, and no file or directory appears."""
    db = tmp_path / "nowhere" / "r.db"
    cli(*argv, "--db", db).one_line_error(2, r"no results database here; run an experiment first")
    assert not (tmp_path / "nowhere").exists()


def test_run_creates_the_missing_directories(tmp_path, spec_file):
    """run --db in directories that do not exist yet creates them and stores the session."""
    db = tmp_path / "a" / "b" / "r.db"
    assert cli("run", spec_file, "--db", db, "--no-report").code == 0
    assert sessions_of(db) == [(1, "finished")]


def test_run_where_the_directory_cannot_be_created(tmp_path, spec_file):
    """--db under a regular file (a path whose parent is a file): one line, nothing created."""
    blocker = write(tmp_path / "file", "x")
    cli("run", spec_file, "--db", blocker / "r.db", "--no-report").one_line_error(
        1, r"cannot create its directory \((Not a directory|File exists)\); pass another --db PATH")
    assert blocker.read_text() == "x"


def test_read_only_database_file_is_reported(tmp_path, kept):
    """A results file archived read-only (mode 444) reports as it did, unchanged."""
    db = Path(shutil.copy(kept, tmp_path / "ro.db"))
    want = cli("report", "--db", kept, "--format", "json")
    db.chmod(0o444)
    before = file_digest(db)
    got = cli("report", "--db", db, "--format", "json")
    assert got.code == 0 and got.out == want.out
    assert file_digest(db) == before


@pytest.mark.parametrize("argv", READERS + [("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_database_from_a_newer_perfab(tmp_path, kept, spec_file, argv):
    """A file whose schema is newer than this perfab: refused (never downgraded), unchanged."""
    db = Path(shutil.copy(kept, tmp_path / "newer.db"))
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    refused_unchanged(db, 1, r"written by a newer perfab \(schema 99, this one knows \d+\); upgrade perfab", *argv)


@pytest.mark.parametrize("argv", [("report", "nosuch"), ("history", "nosuch")], ids=lambda a: a[0])
def test_unknown_experiment_name_lists_the_known_ones(tmp_path, kept, argv):
    """An experiment name not in the database: exit 2, the names it holds."""
    db = Path(shutil.copy(kept, tmp_path / "r.db"))
    refused_unchanged(db, 2, r"no experiment named 'nosuch'; known: kept$", *argv)


@pytest.mark.parametrize("argv", READERS + [("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_empty_db_option(spec_file, argv):
    """--db '' (an unset shell variable): exit 2, says the option is empty; nothing is created."""
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    cli(*argv, "--db", "").one_line_error(2, r"--db is empty; pass the path of a results file")


@pytest.mark.parametrize("argv", READERS + [("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_unreachable_postgresql_url_fails_quickly(spec_file, argv):
    """A postgresql:// URL with nothing listening: one line naming the URL, within seconds."""
    start = time.monotonic()
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    cli(*argv, "--db", "postgresql://perfab@127.0.0.1:1/results").one_line_error(
        1, r"^perfab: postgresql://perfab@127\.0\.0\.1:1/results: cannot connect .*check the URL and that the server")
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("argv", [("report",), ("run", "SPEC", "--no-report")], ids=lambda a: a[0])
def test_symlink_loop_as_database(tmp_path, spec_file, argv):
    """--db naming a symlink loop: one line, no traceback."""
    os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
    os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
    argv = tuple(str(spec_file) if a == "SPEC" else a for a in argv)
    out = cli(*argv, "--db", tmp_path / "loop-a")
    out.one_line_error(out.code, r"loop-a: (no results database here|not a usable perfab database)")
    assert out.code in (1, 2)


@pytest.mark.parametrize("second", ["foreign", "newer", "missing"])
def test_side_by_side_report_with_one_bad_file(tmp_path, kept, second):
    """report --db A --db B where B is not usable: the one line names B; neither file changes."""
    other = tmp_path / "other.db"
    if second == "foreign":
        foreign(other)
    elif second == "newer":
        shutil.copy(kept, other)
        con = sqlite3.connect(other)
        con.execute("PRAGMA user_version = 99")
        con.commit()
        con.close()
    code, why = {"foreign": (1, NOT_PERFAB), "newer": (1, r"written by a newer perfab \(schema 99"),
                 "missing": (2, r"no results database here")}[second]
    before, theirs = file_digest(kept), file_digest(other)
    cli("report", "--db", kept, "--db", other).one_line_error(code, r"other\.db: " + why)
    assert file_digest(kept) == before and file_digest(other) == theirs
    assert second != "missing" or not other.exists()


def test_garbage_wal_beside_a_good_database(tmp_path, kept):
    """A -wal file of random bytes (not a WAL): SQLite ignores it; the report is the stored one."""
    db = Path(shutil.copy(kept, tmp_path / "w.db"))
    write(Path(f"{db}-wal"), bytes(range(200)) * 15)
    want = cli("report", "--db", kept, "--format", "json").out
    before = file_digest(db)
    got = cli("report", "--db", db, "--format", "json")
    assert got.code == 0 and got.out == want
    assert file_digest(db) == before


def test_wal_without_its_database(tmp_path):
    """Only r.db-wal exists (the main file was deleted): no database here, the WAL left alone."""
    wal = write(tmp_path / "r.db-wal", b"x" * 100)
    cli("report", "--db", tmp_path / "r.db").one_line_error(2, r"no results database here")
    assert wal.read_bytes() == b"x" * 100 and not (tmp_path / "r.db").exists()


_WRITER = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")
con.execute("INSERT INTO experiments (name, created_at) VALUES ('held', 0)")
print("holding", flush=True)
time.sleep(60)
"""


def test_report_while_another_process_holds_the_write_lock(tmp_path, kept):
    """A writer mid-transaction (a run storing): report reads the committed state, without waiting for it."""
    db = Path(shutil.copy(kept, tmp_path / "busy.db"))
    want = cli("report", "--db", kept, "--format", "json").out
    holder = subprocess.Popen([sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"holding"
        start = time.monotonic()
        got = cli("report", "--db", db, "--format", "json")
        assert got.code == 0 and got.out == want
        assert time.monotonic() - start < 20
    finally:
        holder.kill()
        holder.wait()
    assert cli("list", "--db", db).out.count("held") == 0  # the uncommitted insert never landed


def test_non_finite_value_stored_by_hand_never_reaches_a_verdict(tmp_path, kept):
    """An infinity written into samples by another tool (SQLite keeps inf; NaN becomes NULL): no inf/nan row."""
    db = Path(shutil.copy(kept, tmp_path / "nan.db"))
    con = sqlite3.connect(db)
    run_id = con.execute("SELECT r.id FROM runs r JOIN planned_runs p ON p.id = r.planned_id "
                         "WHERE p.variant = 'b' AND p.warmup = 0 ORDER BY r.id LIMIT 1").fetchone()[0]
    con.execute("UPDATE samples SET value = ? WHERE run_id = ? AND metric = 'wall_s'", (float("inf"), run_id))
    con.commit()
    con.close()
    before = file_digest(db)
    out = cli("report", "--db", db)
    assert out.code == 0 and "Traceback" not in out.err
    assert "Time elapsed: 1 non-finite sample(s) (inf or nan): refused" in out.out
    assert not any(line.startswith("Time elapsed (s)") for line in out.out.splitlines())  # the row is refused
    assert file_digest(db) == before


def test_two_experiments_share_a_database(tmp_path, spec_file):
    """Two experiments run one after the other into one file: both kept, each reported by name."""
    db = tmp_path / "r.db"
    other = write(tmp_path / "o.toml", two_sides(name="other"))
    assert cli("run", spec_file, "--db", db, "--no-report").code == 0
    first = runs_of(db)
    assert cli("run", other, "--db", db, "--no-report").code == 0
    assert runs_of(db)[: len(first)] == first and len(runs_of(db)) == 2 * len(first)
    listed = cli("list", "--db", db).out
    assert "kept" in listed and "other" in listed
    assert cli("report", "kept", "--db", db).code == 0 and cli("report", "other", "--db", db).code == 0


def test_stored_runs_survive_a_later_session_of_the_same_experiment(tmp_path, spec_file):
    """A second run of the same spec adds a session; the first session's rows are byte-identical."""
    db = tmp_path / "r.db"
    assert cli("run", spec_file, "--db", db, "--no-report").code == 0
    first = runs_of(db)
    assert cli("run", spec_file, "--db", db, "--no-report").code == 0
    assert runs_of(db)[: len(first)] == first and sessions_of(db) == [(1, "finished"), (2, "finished")]
