"""Both stores, opened the same way: a SQLite file and a database on a real PostgreSQL server.

``backends`` parametrizes a test over "sqlite" and "postgres"; the
``stores`` fixture opens the chosen one (``stores(machine=...)``) on a
fresh, empty database for each test.  PostgreSQL is one server for the
whole test session (``pg``), and each test starts from an empty schema.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from pg_server import PgServer, Unavailable
from perfab.metrics import RUSAGE, resolve
from perfab.plan import PlannedRun
from perfab.store import RunRecord, open_store

BACKENDS = ("sqlite", "postgres")

SPEC = """[experiment]
name = "contract"
runs = 3
warmup = 1

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["work", "{variant}"]
parser = "keyvalue"

[[workload.metric]]
name = "ops"
direction = "higher"
"""

ENV = {"cpu.model": "Contract CPU", "kernel.release": "6.1.0-contract", "host.name": "contract"}


@pytest.fixture(scope="session")
def pg():
    """One PostgreSQL server for the session; the tests that need it skip, naming why, when none starts."""
    try:
        server = PgServer().start()
    except Unavailable as e:
        server = e
    yield server
    if isinstance(server, PgServer):
        server.stop()


def pg_or_skip(pg) -> PgServer:
    if isinstance(pg, Unavailable):
        pytest.skip(f"no PostgreSQL server here: {pg}")
    return pg


@pytest.fixture(scope="session")
def pg_url(pg) -> str:
    """A database of the session's server (its perfab schema is emptied before each test that uses it)."""
    return pg_or_skip(pg).new_database()


def empty_schema(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS perfab CASCADE")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def db(backend, tmp_path, request) -> str:
    """The location of an empty results database of ``backend``: a file path or a URL."""
    if backend == "sqlite":
        return str(tmp_path / "results.db")
    url = request.getfixturevalue("pg_url")
    empty_schema(url)
    return url


@pytest.fixture
def stores(db):
    """Open ``db`` (as often as a test likes, for any machine); every store opened is closed afterwards."""
    opened = []

    def make(machine: str | None = None, readonly: bool = False):
        store = open_store(db, readonly=readonly, machine=machine)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def plan(n: int = 4) -> list[PlannedRun]:
    """A plan of n runs, alternating sides a and b, the first a warm-up."""
    return [PlannedRun(i, "w", "ab"[i % 2], 0, i == 0, i // 2, ()) for i in range(n)]


def start(store, name: str = "contract", runs: int = 4) -> int:
    return store.start_session(name, SPEC, "contract.toml", "hash", None, "time", ((),), ENV, plan(runs),
                               {"a": {"commit": "abc"}})


def record(status: str = "ok", ops: float = 100.0, started: float = 1_700_000_000.0, **extra) -> RunRecord:
    base = RunRecord(status, None if status == "ok" else "it failed", started, 0.5, 0.4, 0.1, 2048, 3, 1, 0, None,
                     False, b"ops: %d\n" % ops, b"", 9, 0, {"ops": ops, "wall_s": 0.5},
                     {}, ("a note",),
                     {"ops": resolve("ops", unit=None, higher_is_better=True, exact=False, origin="parser"),
                      "wall_s": RUSAGE["wall_s"]},
                     {"ops": "parser", "wall_s": "rusage"})
    return dataclasses.replace(base, **extra)


def child(db: str, body: str) -> list[str]:
    """argv of a Python process that opens ``db`` as ``store`` and runs ``body`` (for claims held elsewhere)."""
    src = Path(__file__).resolve().parents[2] / "src"
    script = (f"import sys; sys.path.insert(0, {str(src)!r})\n"
              f"from perfab.store import open_store\nstore = open_store({db!r}, machine='here')\n{body}")
    return [sys.executable, "-c", script]


__all__ = ["BACKENDS", "ENV", "SPEC", "backend", "child", "db", "empty_schema", "pg", "pg_or_skip", "pg_url",
           "plan", "record", "start", "stores"]
