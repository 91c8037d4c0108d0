"""The SQLite results store (``.perfab/results.db``).

Every run is committed the moment it ends (WAL journal), so killing perfab
loses at most the run in flight, and ``perfab run --resume`` continues the
stored plan.  Nothing stored is ever replaced: a planned run that is run
again gets a new attempt row, and the newest attempt counts.  A session is
claimed by one runner (``perfab.store.claims``); a second runner is refused
with the holder's name, and every write checks the claim.  A store acts for
one machine (``machine``, the host name by default): its sessions record it
and only its own unfinished sessions are resumed.

Read-only opening (``readonly=True``, used by ``report``, ``list`` and
``plan``) never writes: the file is opened with SQLite's ``mode=ro`` (or
``immutable=1`` for a WAL database without its ``-wal`` file, e.g. on a
read-only archive), a file without perfab's tables is refused, and an
older schema is migrated in an in-memory copy.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from perfab.errors import StoreError, UsageError
from perfab.plan import PlannedRun
from perfab.store.dataset import params_to_json
from perfab.store.claims import claimable, identity, still_mine
from perfab.store.owner import Owner
from perfab.store.reader import Reader
from perfab.store.record import RunRecord
from perfab.store.runwrite import RunWriter
from perfab.store.schema import MIGRATIONS, PERFAB_TABLES, SCHEMA_VERSION, statements

class Store(Reader):
    """A results database; ``Store(path)`` opens it for writing, ``Store(path, readonly=True)`` for reading.

    ``machine`` names the machine this store acts for (default: the host name).  This class opens the
    file and writes (sessions, their claims, runs); what it answers is ``perfab.store.reader.Reader``'s."""

    def __init__(self, path: str | Path, create: bool = True, readonly: bool = False, machine: str | None = None):
        if not str(path).strip():
            raise UsageError("--db is empty; pass the path of a results file (default .perfab/results.db)")
        self.path = Path(path)
        self.readonly = readonly
        self._me = identity(machine)
        self._writer = RunWriter(self._me)  # the per-run write and what a session's runs share
        self.machine = self._me.host
        if not self.path.exists():
            if not create or readonly:
                raise UsageError(f"{self.path}: no results database here; run an experiment first "
                                 "(perfab run SPEC) or pass --db PATH")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"{self.path}: cannot create its directory ({e.strerror}); pass another --db PATH") \
                    from None
        if self.path.is_dir():
            raise UsageError(f"{self.path}: is a directory; pass the path of a results file with --db PATH")
        blocked = _blocked(self.path, readonly)
        if blocked:  # before SQLite opens it: a refused writer leaves no journal file behind
            raise StoreError(f"{self.path}: {blocked}")
        try:
            self.db = _open_readonly(self.path) if readonly else self._open_writable()
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: not a usable perfab database ({_why(e)}); pass another --db PATH") \
                from None
        except (UnicodeDecodeError, ValueError, OverflowError) as e:
            raise StoreError(f"{self.path}: not a usable perfab database (corrupted: {e.__class__.__name__}); "
                             "pass another --db PATH") from None
        self.db.guard(self.path)  # from here on, a damaged page met by any query is one StoreError line

    # -- opening ------------------------------------------------------------

    def _open_writable(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, factory=_Guarded)
        try:
            _check_schema(self.path, db, allow_empty=True)  # before any pragma writes to the file
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            _migrate(db)
            db.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def transaction(self) -> "_Transaction":
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only; nothing can be written")
        return _Transaction(self.db, self.path)

    # -- sessions and their claims --------------------------------------------

    def start_session(self, name: str, spec_text: str, spec_path: str, spec_hash: str, side: str | None,
                      backend: str, groups: tuple[tuple[str, ...], ...], environment: dict[str, str],
                      plan: list[PlannedRun], sources: dict | None = None, design: dict | None = None) -> int:
        """Store a new session, claimed by this process, its design and its whole plan before any run happens."""
        with self.transaction():
            self.db.execute("INSERT OR IGNORE INTO experiments (name, created_at) VALUES (?, ?)", (name, time.time()))
            exp_id = self._experiment_id(name)
            cur = self.db.execute(
                "INSERT INTO sessions (experiment_id, started_at, status, side, spec_path, spec_text, spec_hash, "
                "backend, groups_json, environment_json, owner, host, sources_json, design_json) "
                "VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (exp_id, time.time(), side, spec_path, spec_text, spec_hash, backend, json.dumps(groups),
                 json.dumps(environment, sort_keys=True), self._me.to_json(), self.machine,
                 json.dumps(sources or {}, sort_keys=True), None if design is None else json.dumps(design)))
            session = cur.lastrowid
            self.db.executemany(
                "INSERT INTO planned_runs (session_id, seq, workload, variant, grp, warmup, block, params_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(session, p.seq, p.workload, p.variant, p.group, int(p.warmup), p.block, params_to_json(p.params))
                 for p in plan])
        return session

    def claim(self, session: int, takeover: bool = False) -> None:
        """Make this process the session's runner; StoreError naming the holder when another one runs it."""
        with self.transaction():
            row = self.db.execute("SELECT owner FROM sessions WHERE id = ?", (session,)).fetchone()
            if row is None:
                raise UsageError(f"{self.path}: no session {session}")
            claimable(session, Owner.from_json(row[0]), self._me, takeover)
            self.db.execute("UPDATE sessions SET owner = ?, status = 'running' WHERE id = ?",
                            (self._me.to_json(), session))

    def finish_session(self, session: int, status: str, stop_reason: str | None = None) -> None:
        """Record how the session ended (and why a sequential one stopped) and release its claim."""
        with self.transaction():
            self.db.execute("UPDATE sessions SET status = ?, finished_at = ?, owner = NULL, "
                            "stop_reason = coalesce(?, stop_reason) WHERE id = ? AND (owner IS NULL OR owner = ?)",
                            (status, time.time(), stop_reason, session, self._me.to_json()))

    def replace_spec(self, session: int, spec_text: str, spec_hash: str, design: dict | None = None) -> None:
        """Adopt a changed spec (and its design) for a session whose stored outputs were read again under it
        (parser-only fix)."""
        with self.transaction():
            self._check_claim(session)
            self.db.execute("UPDATE sessions SET spec_text = ?, spec_hash = ?, design_json = ? WHERE id = ?",
                            (spec_text, spec_hash, None if design is None else json.dumps(design), session))

    def add_environment(self, session: int, values: dict[str, str]) -> None:
        """Add measured facts to the session's environment snapshot (e.g. ``busy.*``), keeping the rest."""
        with self.transaction():
            row = self.db.execute("SELECT environment_json FROM sessions WHERE id = ?", (session,)).fetchone()
            if row is None:
                raise UsageError(f"{self.path}: no session {session}")
            env = {**json.loads(row[0]), **values}
            self.db.execute("UPDATE sessions SET environment_json = ? WHERE id = ?",
                            (json.dumps(env, sort_keys=True), session))

    def extend_plan(self, session: int, runs: list[PlannedRun]) -> None:
        """Store more planned runs of a sequential session (one more block) before they run."""
        with self.transaction():
            self._check_claim(session)
            self.db.executemany(
                "INSERT INTO planned_runs (session_id, seq, workload, variant, grp, warmup, block, params_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(session, p.seq, p.workload, p.variant, p.group, int(p.warmup), p.block, params_to_json(p.params))
                 for p in runs])

    def _check_claim(self, session: int) -> None:
        row = self.db.execute("SELECT owner FROM sessions WHERE id = ?", (session,)).fetchone()
        still_mine(session, Owner.from_json(row[0] if row else None), self._me)

    # -- runs ---------------------------------------------------------------

    def record_run(self, session: int, planned: PlannedRun, rec: RunRecord) -> int:
        """Commit one run with its samples as a new attempt of its planned run; returns the run id
        (``perfab.store.runwrite``: one transaction, a few statements)."""
        return self._writer.record(self, session, planned, rec)


def _open_readonly(path: Path) -> sqlite3.Connection:
    """The file opened read-only (``immutable`` for a WAL file without its -wal), an old schema migrated in memory."""
    base = f"file:{quote(str(path.resolve()))}"
    immutable = _wal_mode(path) and not Path(f"{path}-wal").exists()
    db = sqlite3.connect(f"{base}?{'immutable=1' if immutable else 'mode=ro'}", uri=True, timeout=30,
                         isolation_level=None, factory=_Guarded)
    try:
        version = _check_schema(path, db, allow_empty=False)
        if version < SCHEMA_VERSION:  # migrate a copy in memory, never the file
            mem = sqlite3.connect(":memory:", isolation_level=None, factory=_Guarded)
            db.backup(mem)
            db.close()
            db = mem
            _migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def _check_schema(path: Path, db: sqlite3.Connection, allow_empty: bool) -> int:
    """The file's schema version; StoreError for a newer perfab's file or another program's database."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path}: written by a newer perfab (schema {version}, this one knows "
                         f"{SCHEMA_VERSION}); upgrade perfab or pass another --db PATH")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if version == 0 and not tables and allow_empty:
        return 0
    if version == 0 or not PERFAB_TABLES <= tables:
        what = f"its tables ({', '.join(sorted(tables)[:4])}) are not perfab's" if tables else "it holds no tables"
        raise StoreError(f"{path}: not a perfab results database ({what}); pass the --db of a "
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


def _blocked(path: Path, readonly: bool) -> str | None:
    """Why this process cannot use the file (read it; or write it and its journal beside it); None if it can."""
    if path.exists() and not os.access(path, os.R_OK):
        return "cannot read it (permission denied); pass a readable --db PATH or ask its owner"
    if readonly:
        return None
    journal = all(os.access(f"{path}{s}", os.W_OK) for s in ("-wal", "-shm"))
    for p in (path, path.parent) if not journal else (path,):
        if p.exists() and not os.access(p, os.W_OK):
            why = "read-only file system" if os.statvfs(p).f_flag & os.ST_RDONLY else "permission denied"
            reads = " (perfab report reads it as it is)" if path.exists() else ""
            return f"cannot write ({why}); pass a writable --db PATH{reads}"
    return None


def _wal_mode(path: Path) -> bool:
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

    path: Path | None = None

    def _run(self, call, *args):
        try:
            return call(*args)
        except sqlite3.Error as e:
            if self.path is None:
                raise
            raise _store_error(self.path, e) from None

    def fetchone(self):
        return self._run(super().fetchone)

    def fetchall(self):
        return self._run(super().fetchall)

    def fetchmany(self, size: int = 1):
        return self._run(super().fetchmany, size)

    def __next__(self):
        return self._run(super().__next__)


class _Guarded(sqlite3.Connection):
    """A connection whose SQLite errors, once ``guard(path)`` is called, are StoreError lines naming the file."""

    path: Path | None = None

    def guard(self, path: Path) -> None:
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


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT; a SQLite failure becomes one StoreError line, and nothing half-written stays."""

    def __init__(self, db: sqlite3.Connection, path: Path):
        self.db, self.path = db, path

    def __enter__(self):
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise _store_error(self.path, e) from None

    def __exit__(self, exc_type, exc, tb):
        try:
            self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
        except sqlite3.Error as e:
            if exc_type is None:
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise _store_error(self.path, e) from None
        if isinstance(exc, sqlite3.Error):
            raise _store_error(self.path, exc) from None
        return False


def _store_error(path: Path, e: sqlite3.Error) -> StoreError:
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
