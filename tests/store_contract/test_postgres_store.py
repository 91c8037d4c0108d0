"""What only the PostgreSQL store has to get right: the translated schema, its versions, its one-line errors."""

from __future__ import annotations

import io
import sqlite3
import time

import psycopg
import pytest

from contract_helpers import empty_schema, plan, record, start
from perfab.cli import main
from perfab.errors import StoreError, UsageError
from perfab.store import SCHEMA_VERSION, Store, dialect, open_store
from perfab.store.postgres import PostgresStore, display
from perfab.store.schema import MIGRATIONS


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def _pg_columns(url: str) -> dict[str, set[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = 'perfab'").fetchall()
    out: dict[str, set[str]] = {}
    for table, column in rows:
        out.setdefault(table, set()).add(column)
    return out


def _sqlite_columns(path) -> dict[str, set[str]]:
    con = sqlite3.connect(path)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    out = {t: {r[1] for r in con.execute(f"PRAGMA table_info({t})")} for t in tables}
    con.close()
    return out


def test_both_schemas_have_the_same_tables_columns_and_version(tmp_path, pg_url):
    empty_schema(pg_url)
    Store(tmp_path / "r.db").close()
    PostgresStore(pg_url).close()
    assert _pg_columns(pg_url) == _sqlite_columns(tmp_path / "r.db")
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM perfab.migrations ORDER BY version").fetchall() == \
            [(n,) for n, _, _ in MIGRATIONS]
        uniques = conn.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'perfab.runs'::regclass "
                               "AND contype = 'u'").fetchall()
    assert uniques == [("runs_planned_id_attempt_key",)] and SCHEMA_VERSION == MIGRATIONS[-1][0]
    PostgresStore(pg_url).close()  # reopening applies nothing twice
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM perfab.migrations").fetchone()[0] == len(MIGRATIONS)


def test_every_migration_has_a_postgresql_form_without_sqlite_words():
    for number, _, _ in MIGRATIONS:
        text = "\n".join(dialect.migration(number))
        for word in ("INSERT OR", "PRAGMA", "BLOB", " REAL", "_v2", "INTEGER PRIMARY KEY"):
            assert word not in text, (number, word)


def test_a_rebuild_without_its_alter_form_is_refused(monkeypatch):
    monkeypatch.setattr(dialect, "MIGRATIONS", ((7, "rebuild", "CREATE TABLE samples_v7 (x TEXT); "
                                                               "ALTER TABLE samples_v7 RENAME TO samples"),))
    with pytest.raises(dialect.DialectError, match="add its ALTER TABLE form to REBUILDS"):
        dialect.migration(7)


def test_version_1_database_with_runs_is_migrated_in_place(pg_url):
    """Migration 2 on PostgreSQL alters runs in place: the run keeps its id, gets attempt 1, may get attempt 2."""
    empty_schema(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA perfab")
        conn.execute("SET search_path TO perfab")
        conn.execute("CREATE TABLE migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, "
                     "applied_at DOUBLE PRECISION NOT NULL)")
        for statement in dialect.migration(1):
            conn.execute(statement)
        conn.execute("INSERT INTO migrations VALUES (1, 'initial schema', 0)")
        conn.execute("INSERT INTO experiments (name, created_at) VALUES ('old', 0)")
        conn.execute("INSERT INTO sessions (experiment_id, started_at, status, spec_text, spec_hash, backend, "
                     "groups_json, environment_json) VALUES (1, 0, 'finished', 's', 'h', 'time', '[[]]', '{}')")
        conn.execute("INSERT INTO planned_runs (session_id, seq, workload, variant, grp, warmup, block) "
                     "VALUES (1, 0, 'w', 'a', 0, 0, 0)")
        conn.execute("INSERT INTO runs (planned_id, started_at, status) VALUES (1, 5, 'ok')")
        conn.execute("INSERT INTO samples VALUES (1, 'wall_s', 0.5), (1, 'self.main', 40), (1, 'ops', 9)")
    with pytest.raises(StoreError, match="older than this perfab's"):
        open_store(pg_url, readonly=True)
    with open_store(pg_url) as store:
        data = store.load("old")
        assert data.values == {1: {"ops": 9.0, "wall_s": 0.5}} and data.profiles == {1: {"self.main": 40.0}}
        assert [r["attempt"] for r in store.run_rows("old")] == [1]
        assert store._samples("old") == [(1, "ops", 9.0, "backend"), (1, "wall_s", 0.5, "rusage")]
        store.claim(1)
        again = store.record_run(1, plan(1)[0], record())
        assert [(r["run_id"], r["attempt"]) for r in store.run_rows("old", all_attempts=True)] == [(1, 1), (again, 2)]


def test_a_newer_schema_is_refused_untouched(pg_url):
    empty_schema(pg_url)
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO perfab.migrations VALUES (%s, 'future', 0)", (SCHEMA_VERSION + 1,))
    code, out, err = cli("report", "--db", pg_url)
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert f"newer perfab (schema {SCHEMA_VERSION + 1}" in err and "upgrade perfab" in err
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT max(version) FROM perfab.migrations").fetchone()[0] == SCHEMA_VERSION + 1


def test_tables_of_another_program_in_the_schema_are_refused(pg_url):
    empty_schema(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA perfab")
        conn.execute("CREATE TABLE perfab.orders (id int)")
    with pytest.raises(StoreError, match="holds tables that are not perfab's"):
        open_store(pg_url)


def test_an_empty_database_is_reported_as_holding_no_results(pg_url):
    empty_schema(pg_url)
    code, _, err = cli("list", "--db", pg_url)
    assert code == 2 and "no perfab results in this database" in err and len(err.splitlines()) == 1


def test_no_server_is_one_line_naming_the_url_without_its_password(tmp_path):
    url = f"postgresql://perfab:s3cret@/results?host={tmp_path}"
    code, out, err = cli("report", "--db", url)
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert "cannot connect" in err and "s3cret" not in err and "postgresql://perfab@/results" in err


def test_a_malformed_url_is_a_usage_error():
    code, _, err = cli("list", "--db", "postgresql://perfab@/x?nosuchoption=1")
    assert code == 2 and "not a usable PostgreSQL URL" in err and "Traceback" not in err


def test_display_hides_only_the_password():
    assert display("postgresql://u:pw@db.lab:5433/r?sslmode=require") == "postgresql://u@db.lab:5433/r?sslmode=require"
    assert display("postgresql:///r?host=/tmp/s") == "postgresql:///r?host=/tmp/s"


def test_a_run_is_in_a_dataset_whole_or_not_at_all(pg_url):
    """load() reads in one snapshot: a run committed between its queries does not show up half."""
    empty_schema(pg_url)
    writer, reader = open_store(pg_url, machine="m"), open_store(pg_url, readonly=True)
    try:
        session = start(writer)
        writer.record_run(session, plan()[0], record())
        with reader.db.snapshot():
            runs = reader.run_rows("contract")
            writer.record_run(session, plan()[1], record(ops=5.0))  # committed between two reads
            values = reader.samples("contract")
        assert len(runs) == 1 and {rid for rid, _, _ in values} == {runs[0]["run_id"]}
        assert len(reader.load("contract").runs) == 2
    finally:
        writer.close()
        reader.close()


def test_reading_does_not_wait_for_a_long_write(pg_url):
    empty_schema(pg_url)
    writer, reader = open_store(pg_url, machine="m"), open_store(pg_url, readonly=True)
    try:
        session = start(writer)
        with writer.transaction():
            writer.db.execute("SELECT owner FROM sessions WHERE id = ?", (session,))  # holds the session's row
            began = time.monotonic()
            assert [s.id for s in reader.sessions("contract")] == [session]
            assert time.monotonic() - began < 1.0
    finally:
        writer.close()
        reader.close()


def test_a_read_only_store_cannot_write_even_by_hand(pg_url):
    empty_schema(pg_url)
    PostgresStore(pg_url).close()
    with open_store(pg_url, readonly=True) as reader, pytest.raises(StoreError, match="cannot write"):
        reader.db.execute("INSERT INTO experiments (name, created_at) VALUES (?, ?)", ("x", 0.0))


def test_open_store_dispatches_on_the_shape_of_db(tmp_path, pg_url):
    assert type(open_store(tmp_path / "a.db")) is Store
    with open_store(pg_url) as store:
        assert type(store) is PostgresStore
    with pytest.raises(UsageError):
        open_store(tmp_path / "none.db", readonly=True)


def test_a_later_runs_write_that_the_server_refuses_is_one_line_and_stores_nothing(pg_url):
    """The one-statement write goes through libpq directly: a server error is still one StoreError line,
    and the runs stored before stay."""
    empty_schema(pg_url)
    with open_store(pg_url) as store:
        session = start(store)
        kept = store.record_run(session, plan()[0], record())
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CREATE FUNCTION perfab.refuse() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$ BEGIN RAISE EXCEPTION 'no more runs today'; END $$")
            conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON perfab.runs FOR EACH ROW EXECUTE FUNCTION "
                         "perfab.refuse()")
        with pytest.raises(StoreError) as info:
            store.record_run(session, plan()[1], record())
        assert "no more runs today" in str(info.value) and "\n" not in str(info.value)
        assert [r["run_id"] for r in store.run_rows("contract", all_attempts=True)] == [kept]


def test_a_connection_lost_before_a_later_run_is_one_line_saying_the_runs_are_kept(pg_url):
    empty_schema(pg_url)
    with open_store(pg_url) as store:
        session = start(store)
        kept = [store.record_run(session, plan()[i], record()) for i in range(2)]  # the second: one statement
        pid = store.db.execute_raw("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreError) as info:
            store.record_run(session, plan()[2], record())
        assert "lost the connection" in str(info.value) and "stored runs are kept" in str(info.value)
    with open_store(pg_url, readonly=True) as store:
        assert [r["run_id"] for r in store.run_rows("contract", all_attempts=True)] == kept
