"""A SQLite results file opened, checked and guarded: what ``Store`` and ``perfab list`` share.

``connect`` refuses what cannot be used with one line naming the cause and
the fix (an empty ``--db``, a file that is missing, a directory, unreadable
or unwritable, another program's database, a newer perfab's), then opens
it: for writing in WAL mode with ``synchronous=NORMAL``, migrated to the
current schema; or read-only with SQLite's ``mode=ro`` (``immutable=1`` for
a WAL database without its ``-wal`` file, e.g. on a read-only archive), an
older schema migrated in an in-memory copy, never in the file.  The
connection turns any SQLite error met later (a damaged page at a fetch)
into one ``StoreError`` line naming the file; ``Transaction`` does the same
for BEGIN ... COMMIT and leaves nothing half-written.

It imports neither ``pathlib`` nor the store's typed values, so listing a
store loads little beyond ``sqlite3``.
"""

from __future__ import annotations

import os
import sqlite3
import time

from perfab.errors import StoreError, UsageError
from perfab.store.schema import MIGRATIONS, PERFAB_TABLES, SCHEMA_VERSION, statements

_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def shown(path: str | os.PathLike) -> str:
    """``path`` as ``pathlib`` prints it (no repeated separators, no ``.`` parts), without importing it."""
    text = os.fspath(path)
    lead = "//" if text.startswith("//") and not text.startswith("///") else "/" if text.startswith("/") else ""
    return lead + "/".join(p for p in text.split("/") if p not in ("", ".")) or "."


def connect(path: str | os.PathLike, create: bool = True, readonly: bool = False) -> "Guarded":
    """The results file at ``path``, opened for writing (created with its directory if ``create``) or
    read-only; a UsageError or StoreError line naming the cause and the fix when it cannot be used."""
    if not str(path).strip():
        raise UsageError("--db is empty; pass the path of a results file (default .perfab/results.db)")
    path, where = os.fspath(path), shown(path)
    if not os.path.exists(path):
        if not create or readonly:
            raise UsageError(f"{where}: no results database here; run an experiment first "
                             "(perfab run SPEC) or pass --db PATH")
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        except OSError as e:
            raise StoreError(f"{where}: cannot create its directory ({e.strerror}); pass another --db PATH") \
                from None
    if os.path.isdir(path):
        raise UsageError(f"{where}: is a directory; pass the path of a results file with --db PATH")
    blocked = _blocked(path, readonly)
    if blocked:  # before SQLite opens it: a refused writer leaves no journal file behind
        raise StoreError(f"{where}: {blocked}")
    try:
        db = _open_readonly(path, where) if readonly else _open_writable(path, where)
    except sqlite3.Error as e:
        raise StoreError(f"{where}: not a usable perfab database ({_why(e)}); pass another --db PATH") from None
    except (UnicodeDecodeError, ValueError, OverflowError) as e:
        raise StoreError(f"{where}: not a usable perfab database (corrupted: {e.__class__.__name__}); "
                         "pass another --db PATH") from None
    db.guard(where)  # from here on, a damaged page met by any query is one StoreError line
    return db


def _open_writable(path: str, where: str) -> "Guarded":
    db = sqlite3.connect(path, timeout=30, isolation_level=None, factory=Guarded)
    try:
        _check_schema(where, db, allow_empty=True)  # before any pragma writes to the file
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        _migrate(db)
        db.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        db.close()
        raise
    return db


def _open_readonly(path: str, where: str) -> "Guarded":
    """The file opened read-only (``immutable`` for a WAL file without its -wal), an old schema migrated in memory."""
    base = f"file:{_quote(os.path.realpath(path))}"
    immutable = _wal_mode(path) and not os.path.exists(f"{path}-wal")
    db = sqlite3.connect(f"{base}?{'immutable=1' if immutable else 'mode=ro'}", uri=True, timeout=30,
                         isolation_level=None, factory=Guarded)
    try:
        version = _check_schema(where, db, allow_empty=False)
        if version < SCHEMA_VERSION:  # migrate a copy in memory, never the file
            mem = sqlite3.connect(":memory:", isolation_level=None, factory=Guarded)
            db.backup(mem)
            db.close()
            db = mem
            _migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def _quote(path: str) -> str:
    """``path`` percent-encoded for a ``file:`` URI (as ``urllib.parse.quote`` does, from its bytes)."""
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(path))


def _check_schema(where: str, db: sqlite3.Connection, allow_empty: bool) -> int:
    """The file's schema version; StoreError for a newer perfab's file or another program's database."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"{where}: written by a newer perfab (schema {version}, this one knows "
                         f"{SCHEMA_VERSION}); upgrade perfab or pass another --db PATH")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if version == 0 and not tables and allow_empty:
        return 0
    if version == 0 or not PERFAB_TABLES <= tables:
        what = f"its tables ({', '.join(sorted(tables)[:4])}) are not perfab's" if tables else "it holds no tables"
        raise StoreError(f"{where}: not a perfab results database ({what}); pass the --db of a "
                         "perfab results file")
    return version


def _migrate(db: sqlite3.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version >= SCHEMA_VERSION:
        return
    db.execute("PRAGMA foreign_keys=OFF")  # table rebuilds; cannot change inside a transaction
    if version == 0:
        db.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, "
                   "description TEXT NOT NULL, applied_at REAL NOT NULL)")
    for number, description, sql in MIGRATIONS:
        if number <= version:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements(sql):
                db.execute(statement)
            db.execute("INSERT INTO migrations VALUES (?, ?, ?)", (number, description, time.time()))
            db.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def _blocked(path: str, readonly: bool) -> str | None:
    """Why this process cannot use the file (read it; or write it and its journal beside it); None if it can."""
    if os.path.exists(path) and not os.access(path, os.R_OK):
        return "cannot read it (permission denied); pass a readable --db PATH or ask its owner"
    if readonly:
        return None
    journal = all(os.access(f"{path}{s}", os.W_OK) for s in ("-wal", "-shm"))
    for p in (path, os.path.dirname(path) or ".") if not journal else (path,):
        if os.path.exists(p) and not os.access(p, os.W_OK):
            why = "read-only file system" if os.statvfs(p).f_flag & os.ST_RDONLY else "permission denied"
            reads = " (perfab report reads it as it is)" if os.path.exists(path) else ""
            return f"cannot write ({why}); pass a writable --db PATH{reads}"
    return None


def _wal_mode(path: str) -> bool:
    """Bytes 18 and 19 of a SQLite header are 2 for a WAL database."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _why(e: sqlite3.Error) -> str:
    text = str(e) or e.__class__.__name__
    return text.splitlines()[0][:200]


class _Cursor(sqlite3.Cursor):
    """Rows read lazily: a damaged page can surface at any fetch, not only at execute."""

    path: str | None = None

    def _run(self, call, *args):
        try:
            return call(*args)
        except sqlite3.Error as e:
            if self.path is None:
                raise
            raise store_error(self.path, e) from None

    def fetchone(self):
        return self._run(super().fetchone)

    def fetchall(self):
        return self._run(super().fetchall)

    def fetchmany(self, size: int = 1):
        return self._run(super().fetchmany, size)

    def __next__(self):
        return self._run(super().__next__)


class Guarded(sqlite3.Connection):
    """A connection whose SQLite errors, once ``guard(path)`` is called, are StoreError lines naming the file."""

    path: str | None = None

    def guard(self, path: str) -> None:
        self.path = path

    def _cursor(self) -> _Cursor:
        cur = self.cursor(_Cursor)
        cur.path = self.path
        return cur

    def execute(self, sql: str, params=()):
        cur = self._cursor()
        return cur._run(cur.execute, sql, params)

    def executemany(self, sql: str, rows):
        cur = self._cursor()
        return cur._run(cur.executemany, sql, rows)

    def stream(self, sql: str, params=()):
        """A query whose rows are read as they are fetched (SQLite's cursors always are)."""
        return self.execute(sql, params)


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT; a SQLite failure becomes one StoreError line, and nothing half-written stays.

    It turns SQLite's errors into StoreError lines itself, so its own statements bypass the connection's guard
    (``sqlite3.Connection.execute``): a stored run pays for two of them."""

    def __init__(self, db: sqlite3.Connection, path: str):
        self.db, self.path = db, path

    def __enter__(self):
        try:
            sqlite3.Connection.execute(self.db, "BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise store_error(self.path, e) from None

    def __exit__(self, exc_type, exc, tb):
        try:
            sqlite3.Connection.execute(self.db, "COMMIT" if exc_type is None else "ROLLBACK")
        except sqlite3.Error as e:
            if exc_type is None:
                try:
                    sqlite3.Connection.execute(self.db, "ROLLBACK")
                except sqlite3.Error:
                    pass
                raise store_error(self.path, e) from None
        if isinstance(exc, sqlite3.Error):
            raise store_error(self.path, exc) from None
        return False


def store_error(path: str, e: sqlite3.Error) -> StoreError:
    """A SQLite failure on the file at ``path`` as one line: the disk full, read-only, locked, or damaged."""
    text = _why(e)
    if "full" in text:
        return StoreError(f"{path}: the disk is full ({text}); free space, then continue with "
                          "`perfab run SPEC --resume` (stored runs are kept)")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path}: cannot write ({text}); pass a writable --db PATH")
    if "locked" in text or "busy" in text:
        return StoreError(f"{path}: the database stayed locked by another process ({text}); try again when it "
                          "is done")
    return StoreError(f"{path}: {text}; the database may be damaged: check it with `sqlite3 {path} "
                      "'PRAGMA integrity_check'`")
