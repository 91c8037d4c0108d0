"""A PostgreSQL --db that is not perfab's to change: refused before anything is written, by every command.

A real server (``tests/store_contract/pg_server.py``).  Another
application's schema named ``perfab`` (its own tables, or its own
``migrations`` table with another history) and a newer perfab's schema are
refused by ``submit``, ``worker``, ``run`` and ``report`` with one line;
the database's tables and rows stay exactly as they were, and the work
queue's tables are not created.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reliability_helpers import cli, two_sides, write

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store_contract"))
from pg_server import PgServer, Unavailable  # noqa: E402

psycopg = pytest.importorskip("psycopg")


@pytest.fixture(scope="module")
def server():
    try:
        pg = PgServer().start()
    except Unavailable as e:
        pytest.skip(f"no PostgreSQL server here: {e}")
    yield pg
    pg.stop()


FOREIGN = {
    "own-tables": ["CREATE SCHEMA perfab", "CREATE TABLE perfab.invoices (id int, total numeric)",
                   "INSERT INTO perfab.invoices VALUES (1, 9.5)"],
    "own-migrations-table": ["CREATE SCHEMA perfab", "CREATE TABLE perfab.migrations (id int, name text)",
                             "INSERT INTO perfab.migrations VALUES (1, 'create users')"],
    "migrations-with-other-history": [
        "CREATE SCHEMA perfab",
        "CREATE TABLE perfab.migrations (version bigint, description text, applied_at double precision)",
        "INSERT INTO perfab.migrations VALUES (1, 'create users', 0)",
        "CREATE TABLE perfab.users (id int)"],
    "empty-migrations-table": [
        "CREATE SCHEMA perfab",
        "CREATE TABLE perfab.migrations (version bigint, description text, applied_at double precision)"],
}
NEWER = ["CREATE SCHEMA perfab",
         "CREATE TABLE perfab.migrations (version bigint, description text, applied_at double precision)",
         "INSERT INTO perfab.migrations VALUES (1, 'initial schema', 0)",
         "INSERT INTO perfab.migrations VALUES (99, 'from a later perfab', 0)"]


def prepared(server, statements: list[str]) -> str:
    url = server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)
    return url


def snapshot(url: str) -> list:
    """Every table of the database with its rows: what must not change."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute("SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN "
                              "('pg_catalog', 'information_schema') ORDER BY 1, 2").fetchall()
        return [(s, t, sorted(map(repr, conn.execute(f'SELECT * FROM "{s}"."{t}"').fetchall()))) for s, t in tables]


def commands(tmp_path: Path, url: str) -> dict[str, list[str]]:
    spec = write(tmp_path / "s.toml", two_sides(name="pgrel"))
    return {"submit": ["submit", spec, "--db", url, "--machines", "lab"],
            "worker": ["worker", "--db", url, "--machine-class", "lab", "--until-idle"],
            "run": ["run", spec, "--db", url, "--no-report"],
            "report": ["report", "--db", url]}


@pytest.mark.parametrize("command", ["submit", "worker", "run", "report"])
@pytest.mark.parametrize("case", list(FOREIGN))
def test_another_applications_schema_is_left_alone(server, tmp_path, case, command):
    url = prepared(server, FOREIGN[case])
    before = snapshot(url)
    out = cli(*commands(tmp_path, url)[command])
    out.one_line_error(1, r"the schema 'perfab' holds tables that are not perfab's \(.+\); pass the --db of a "
                          r"perfab database$")
    assert snapshot(url) == before


@pytest.mark.parametrize("command", ["submit", "worker", "run", "report"])
def test_a_newer_perfab_schema_is_refused(server, tmp_path, command):
    url = prepared(server, NEWER)
    before = snapshot(url)
    out = cli(*commands(tmp_path, url)[command])
    out.one_line_error(1, r"written by a newer perfab \(schema 99, this one knows \d+\); upgrade perfab or pass "
                          r"another --db$")
    assert snapshot(url) == before


def test_an_empty_database_is_still_set_up_by_submit(server, tmp_path):
    """The checks are narrow: a fresh database gets the queue and the job."""
    url = server.new_database()
    out = cli(*commands(tmp_path, url)["submit"])
    assert out.code == 0, out.err
    assert any(t == "procrastinate_jobs" for _, t, _ in snapshot(url))
