"""The PostgreSQL results store (``--db postgresql://...``), shared by a fleet of machines.

``PostgresStore`` is ``perfab.store.sqlite.Store`` over a psycopg 3
connection: it inherits every question the SQLite store answers, and its
connection speaks them in PostgreSQL's dialect (``perfab.store.dialect``).
Its tables live in the schema ``perfab`` of the database the URL names
(the work queue's tables, ``perfab.fleet``, stay in ``public``); the
schema is versioned like SQLite's: the ``migrations`` table holds every
migration applied, and the newest one is the version.  Migrations run
under an advisory lock, so workers starting together migrate once.

A write is one transaction; reading a session's claim inside it locks the
session's row, so two runners can never both claim a session nor both
store an attempt.  ``load`` reads in one snapshot (REPEATABLE READ), so a
run committed meanwhile is either wholly in the dataset or not at all.
Read-only opening (``report``, ``list``) never writes: its transactions
are read-only and a database of an older schema is refused with the fix.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from perfab.errors import StoreError, UsageError
from perfab.store import dialect
from perfab.store.claims import identity
from perfab.store.dataset import Dataset
from perfab.store.schema import SCHEMA_VERSION
from perfab.store.pgwrite import OneTripWriter
from perfab.store.sqlite import Store

_MIGRATION_LOCK = 0x70657266_61620001  # pg_advisory_xact_lock key while the schema is changed ("perfab" 1)

def display(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[1]}"))


class PostgresStore(Store):
    """A results database on a PostgreSQL server; ``PostgresStore(url)`` for writing, ``readonly=True`` to read."""

    def __init__(self, url: str, create: bool = True, readonly: bool = False, machine: str | None = None):
        self.url = url
        self.path = display(url)  # named in every message, as the SQLite store names its file
        self.readonly = readonly
        self._me = identity(machine)
        self._writer = OneTripWriter(self._me)  # a run stored in one round trip (perfab.store.pgwrite)
        self.machine = self._me.host
        conn = connect(url, self.path, f"perfab {'reader' if readonly else 'store'} on {self.machine}")
        try:
            self.db = _Connection(conn, self.path)
            self._open(create)
        except BaseException:
            conn.close()
            raise

    def _open(self, create: bool) -> None:
        version = self._version()
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path}: written by a newer perfab (schema {version}, this one knows "
                             f"{SCHEMA_VERSION}); upgrade perfab or pass another --db")
        if self.readonly or not create:
            if version == 0:
                raise UsageError(f"{self.path}: no perfab results in this database; run an experiment first "
                                 "(perfab run SPEC --db URL) or pass another --db")
            if version < SCHEMA_VERSION:
                raise StoreError(f"{self.path}: perfab schema {version} is older than this perfab's "
                                 f"({SCHEMA_VERSION}); open it once for writing (perfab run or perfab worker) "
                                 "to migrate it")
        if self.readonly:
            self.db.conn.execute("SET default_transaction_read_only = on")
        elif version < SCHEMA_VERSION:
            self._migrate()
        self.db.conn.execute(f"SET search_path TO {dialect.SCHEMA}")

    def _version(self) -> int:
        """The newest migration applied; 0 for a database without perfab's tables (StoreError for others')."""
        return schema_version(self.db.execute_raw, self.path)

    def _migrate(self) -> None:
        """Apply the missing migrations, each in one transaction, under an advisory lock."""
        from perfab.store.schema import MIGRATIONS

        for number, description, _ in MIGRATIONS:
            with self.transaction():
                self.db.execute_raw("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                self.db.execute_raw(f"CREATE SCHEMA IF NOT EXISTS {dialect.SCHEMA}")
                self.db.execute_raw(f"SET LOCAL search_path TO {dialect.SCHEMA}")
                self.db.execute_raw("CREATE TABLE IF NOT EXISTS migrations (version BIGINT PRIMARY KEY, "
                                    "description TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)")
                done = self.db.execute_raw("SELECT 1 FROM migrations WHERE version = %s", (number,)).fetchone()
                if done:
                    continue  # another process applied it meanwhile
                for statement in dialect.migration(number):
                    self.db.execute_raw(statement)
                self.db.execute_raw("INSERT INTO migrations VALUES (%s, %s, %s)", (number, description, time.time()))

    def transaction(self) -> "_Transaction":
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only; nothing can be written")
        return _Transaction(self.db)

    def load(self, name: str) -> Dataset:
        """The dataset of experiment ``name``, read in one snapshot (its rows streamed by server-side cursors)."""
        with self.db.snapshot():
            return super().load(name)


def schema_version(execute, where: str) -> int:
    """The perfab schema's version in the database ``execute`` reaches; 0 when there is none.

    Checked before anything is written, as the SQLite store checks a file: a schema named ``perfab``
    whose tables or migration history are not perfab's is another application's (StoreError), and a
    newer perfab's schema is refused naming both versions."""
    from perfab.store.schema import MIGRATIONS, PERFAB_TABLES

    schema = dialect.SCHEMA
    tables = {r[0] for r in execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()}
    if not tables:
        return 0
    history = _history(execute, schema) if "migrations" in tables else None
    known = {number: description for number, description, _ in MIGRATIONS}
    foreign = StoreError(f"{where}: the schema {schema!r} holds tables that are not perfab's "
                         f"({', '.join(sorted(tables)[:4])}); pass the --db of a perfab database")
    if not history or any(known.get(n, d) != d for n, d in history):
        raise foreign
    version = max(n for n, _ in history)
    if version > SCHEMA_VERSION:
        raise StoreError(f"{where}: written by a newer perfab (schema {version}, this one knows "
                         f"{SCHEMA_VERSION}); upgrade perfab or pass another --db")
    if not PERFAB_TABLES <= tables:
        raise foreign
    return version


def _history(execute, schema: str) -> list[tuple[int, str]] | None:
    """(version, description) of every applied migration; None when ``migrations`` is not perfab's table."""
    columns = {r[0] for r in execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                                     "AND table_name = 'migrations'", (schema,)).fetchall()}
    if not {"version", "description", "applied_at"} <= columns:
        return None
    rows = execute(f"SELECT version, description FROM {schema}.migrations").fetchall()
    return [(int(n), str(d)) for n, d in rows]


def connect(url: str, where: str, application: str):
    """A psycopg connection in autocommit mode; one-line errors for a missing driver or server."""
    try:
        import psycopg
    except ImportError:
        raise UsageError(f"{where}: a PostgreSQL --db needs psycopg; pip install 'perfab[fleet]'") from None
    try:
        return psycopg.connect(url, autocommit=True, application_name=application[:63], connect_timeout=10)
    except psycopg.ProgrammingError as e:  # libpq could not parse the URL
        raise UsageError(f"{where}: not a usable PostgreSQL URL ({first_line(e)}); "
                         "e.g. postgresql://user@host/dbname") from None
    except psycopg.Error as e:
        raise StoreError(f"{where}: cannot connect ({first_line(e)}); check the URL and that the server "
                         "is running") from None


def first_line(e: BaseException) -> str:
    text = str(e).strip() or e.__class__.__name__
    return text.splitlines()[0][:200]


class _Cursor:
    """What the SQLite store reads from a cursor: rows, ``description`` and ``lastrowid``."""

    def __init__(self, cur, lastrowid: int | None):
        self.cur, self.lastrowid = cur, lastrowid
        self.description = cur.description

    def fetchone(self):
        return self.cur.fetchone()

    def fetchall(self):
        return self.cur.fetchall()

    def __iter__(self):
        return iter(self.cur)


class _Stream:
    """Rows of a server-side cursor, ``fetchmany`` at a time; the cursor closes when they run out."""

    def __init__(self, cur, where: str):
        self.cur, self.where = cur, where

    def fetchmany(self, size: int) -> list:
        import psycopg

        try:
            rows = self.cur.fetchmany(size)
        except psycopg.Error as e:
            self.cur.close()
            raise store_error(self.where, e) from None
        if not rows:
            self.cur.close()
        return rows


class _Connection:
    """A psycopg connection that takes the SQLite store's SQL (``execute``, ``executemany``, ``close``)."""

    def __init__(self, conn, where: str):
        self.conn, self.where = conn, where
        self.prepared: set[bytes] = set()  # names ``execute_prepared`` prepared on this connection

    def execute(self, sql: str, params: tuple | list = ()) -> _Cursor:
        returning = sql.lstrip().startswith("INSERT")
        cur = self.execute_raw(dialect.query(sql, returning), tuple(params))
        lastrowid = None
        if returning and cur.description is not None:
            row = cur.fetchone()
            lastrowid = row[0] if row else None
        return _Cursor(cur, lastrowid)

    def executemany(self, sql: str, rows) -> None:
        rows = [tuple(r) for r in rows]
        if not rows:
            return
        import psycopg

        try:
            with self.conn.cursor() as cur:
                cur.executemany(dialect.query(sql), rows)
        except psycopg.Error as e:
            raise store_error(self.where, e) from None

    def stream(self, sql: str, params: tuple | list = ()) -> "_Stream":
        """A query's rows through a server-side cursor, fetched a chunk at a time (inside ``snapshot``).

        Every row is read, so the cursor is planned for all of them (``cursor_tuple_fraction`` 1): planned
        for its first tenth, as by default, the runs of 100,000 took 22 s to read instead of 1.2 s."""
        import psycopg

        self.execute_raw("SET LOCAL cursor_tuple_fraction = 1")
        cur = self.conn.cursor(name="perfab_stream")
        try:
            cur.execute(dialect.query(sql), tuple(params))
        except psycopg.Error as e:
            cur.close()
            raise store_error(self.where, e) from None
        return _Stream(cur, self.where)

    def execute_prepared(self, name: str, sql: str, params: tuple) -> tuple | None:
        """``sql`` (``%s`` placeholders), prepared as ``name`` at its first use on this connection and executed
        through libpq with ``params`` sent as text (``text_param``: the statement must cast each one or compare
        it with a typed column): the first row of its answer as text (bytes; None for NULL), or None.

        psycopg's cursor adapts every parameter and tracks its prepared statements in Python at each execution:
        for the statement every run pays for (``perfab.store.pgwrite``), most of perfab's own time of the write."""
        import psycopg

        pgconn, key = self.conn.pgconn, name.encode()
        try:
            if key not in self.prepared:
                self._check(pgconn.prepare(key, _numbered(sql).encode()), pgconn)
                self.prepared.add(key)
            encoding = self.conn.info.encoding
            result = self._check(pgconn.exec_prepared(key, [_text_param(v, encoding) for v in params]), pgconn)
        except psycopg.Error as e:
            raise store_error(self.where, e) from None
        return tuple(result.get_value(0, i) for i in range(result.nfields)) if result.ntuples else None

    def _check(self, result, pgconn):
        """``result`` when it succeeded, else raises its error as psycopg would have."""
        import psycopg
        from psycopg import pq

        if result.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            return result
        if pgconn.status != pq.ConnStatus.OK:
            raise psycopg.OperationalError(pgconn.get_error_message() or "the connection was lost")
        raise psycopg.errors.error_from_result(result, self.conn.info.encoding)

    def execute_raw(self, sql: str, params: tuple | None = None):
        """PostgreSQL's own SQL; a failure becomes one StoreError line."""
        import psycopg

        try:
            return self.conn.execute(sql, params)
        except psycopg.Error as e:
            raise store_error(self.where, e) from None

    @contextmanager
    def snapshot(self):
        """One read-only REPEATABLE READ transaction around several reads."""
        self.execute_raw("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield
        finally:
            self._end("ROLLBACK")

    def _end(self, command: str) -> None:
        import psycopg

        try:
            self.conn.execute(command)
        except psycopg.Error:
            pass

    def close(self) -> None:
        self.conn.close()


def _numbered(sql: str) -> str:
    """``%s`` placeholders as libpq's ``$1``, ``$2``, ... (the statement holds no other ``%``)."""
    parts = sql.split("%s")
    return "".join(f"{part}${i}" for i, part in enumerate(parts[:-1], 1)) + parts[-1]


def _text_param(value, encoding: str) -> bytes | None:
    """A parameter in PostgreSQL's text input form, in the connection's ``encoding``: a float's shortest repr
    (read back to the same double), bytes as hex (bytea), None as NULL."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return b"\\x" + value.hex().encode()
    if isinstance(value, float):
        return repr(value).encode()
    return str(value).encode(encoding)


class _Transaction:
    """BEGIN ... COMMIT; a failure rolls back whole and becomes one StoreError line."""

    def __init__(self, db: _Connection):
        self.db = db

    def __enter__(self):
        self.db.execute_raw("BEGIN")

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.db._end("ROLLBACK")
            return False
        import psycopg

        try:
            self.db.conn.execute("COMMIT")
        except psycopg.Error as e:
            self.db._end("ROLLBACK")
            raise store_error(self.db.where, e) from None
        return False


def store_error(where: str, e: Exception) -> StoreError:
    """A psycopg error as one line naming the cause and the fix."""
    import psycopg

    text = first_line(e)
    if isinstance(e, psycopg.errors.DiskFull):
        return StoreError(f"{where}: the server's disk is full ({text}); free space, then continue with "
                          "`perfab run SPEC --resume` (stored runs are kept)")
    if isinstance(e, psycopg.errors.ReadOnlySqlTransaction):
        return StoreError(f"{where}: cannot write ({text}); pass a writable --db")
    if isinstance(e, psycopg.OperationalError):
        return StoreError(f"{where}: lost the connection to the server ({text}); stored runs are kept: "
                          "continue with --resume when it is back")
    return StoreError(f"{where}: {text}")
