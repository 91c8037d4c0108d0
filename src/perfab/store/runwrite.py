"""Storing one run: the write every run pays for, in as few statements as its guarantees allow.

A run is one transaction, committed before the runner starts the next run:

1. the session's claim is read (on PostgreSQL the read locks the session's
   row) and must still be this runner's, else nothing is written;
2. the run row is inserted as the planned run's next attempt, the attempt
   counted inside the same statement;
3. its samples go in one multi-row INSERT, and its exclusions and profile
   shares likewise; a metric's unit and direction only when they are new
   or changed (the first run of a workload, rarely later).

The planned run's id is looked up once per session (``seq -> id``, read
again when a sequential session's plan grows): planned runs are never
changed or removed once stored, so the answer cannot go stale.  The claim is
compared as the stored text first; only when that differs is it parsed and
judged (``perfab.store.claims``), so a session taken over is still refused
word for word.

What "committed" guarantees is the database's: SQLite runs in WAL mode with
``synchronous=NORMAL``, so a commit has reached the WAL file through the
operating system before the next run starts; it survives perfab being
killed at any instant (SIGKILL, a crash, the terminal closed), and the next
opener replays it.  A crash of the operating system or a power loss may roll
back the last runs committed since the WAL was last synced (at each
checkpoint); the database stays consistent and those planned runs have no
attempt, so ``perfab run SPEC --resume`` runs them again.  PostgreSQL's
commit is the server's (``perfab.store.pgwrite``).
"""

from __future__ import annotations

import json
import sqlite3
from functools import lru_cache

from perfab.errors import StoreError
from perfab.plan import PlannedRun
from perfab.store.claims import still_mine
from perfab.store.owner import Owner
from perfab.store.record import RunRecord

RUN_COLUMNS = ("planned_id, attempt, started_at, status, reason, wall_s, user_s, sys_s, max_rss_kb, nvcsw, "
               "nivcsw, exit_code, signal, timed_out, stdout, stderr, stdout_bytes, stderr_bytes, notes_json")
INSERT_RUN = (f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, (SELECT coalesce(max(attempt), 0) + 1 FROM runs "
              "WHERE planned_id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
CLAIM = "SELECT owner FROM sessions WHERE id = ?"  # locking on PostgreSQL (perfab.store.dialect.LOCKING_READS)


class RunWriter:
    """One store's per-run write (see the module docstring); it keeps what a session's runs share."""

    def __init__(self, me: Owner):
        self.me = me  # this runner's claim
        self.mine = me.to_json()  # the claim as the store holds it when this runner made it
        self.planned_ids: dict[int, dict[int, int]] = {}  # session -> seq -> planned run id
        self.meta_seen: dict[tuple[int, str, str], tuple] = {}  # (session, workload, metric) -> meta written
        self.meta_last: dict[tuple[int, str], dict] = {}  # (session, workload) -> the last run's meta, all written
        self._cursor: tuple | None = None  # (SQLite connection, its plain cursor) for ``statements``

    def record(self, store, session: int, planned: PlannedRun, rec: RunRecord) -> int:
        """Commit ``rec`` as a new attempt of ``planned`` in one transaction; the run's id."""
        with store.transaction():
            db = self.statements(store.db)
            self.check_claim(db, session)
            run_id = self.insert(db, session, planned, rec)
            fresh = self.write_meta(db, session, planned.workload, rec)
        self.meta_seen.update(fresh)  # once committed: a rolled-back write is written again next time
        self.meta_last[(session, planned.workload)] = rec.meta
        return run_id

    def statements(self, db):
        """What the write's statements run on: a plain cursor of a SQLite connection, made once (inside the
        write's transaction, which turns a SQLite error into one StoreError line itself, the connection's guard
        would only add a cursor and a call per statement), else the connection itself."""
        if not isinstance(db, sqlite3.Connection):
            return db
        if self._cursor is None or self._cursor[0] is not db:
            self._cursor = (db, sqlite3.Connection.cursor(db))
        return self._cursor[1]

    def check_claim(self, db, session: int) -> None:
        """StoreError when the session is no longer this runner's (read inside the write's transaction)."""
        row = db.execute(CLAIM, (session,)).fetchone()
        self.judge_claim(session, row[0] if row else None)

    def judge_claim(self, session: int, owner: str | None) -> None:
        """The stored claim text ``owner`` is this runner's, or StoreError naming who holds the session."""
        if owner != self.mine:
            still_mine(session, Owner.from_json(owner), self.me)

    def planned_id(self, db, session: int, seq: int) -> int:
        """The id of planned run ``seq`` of ``session``; StoreError when the session has no such run."""
        ids = self.planned_ids.get(session)
        if ids is None or seq not in ids:
            ids = self.planned_ids[session] = dict(
                db.execute("SELECT seq, id FROM planned_runs WHERE session_id = ?", (session,)).fetchall())
            if seq not in ids:
                raise StoreError(f"session {session} has no planned run {seq}")
        return ids[seq]

    def insert(self, db, session: int, planned: PlannedRun, rec: RunRecord) -> int:
        """The run row, its samples, exclusions and profile shares; the run's id."""
        pid = self.planned_id(db, session, planned.seq)
        run_id = db.execute(INSERT_RUN, (pid, pid, *run_values(rec))).lastrowid
        if rec.metrics:
            sources, values = rec.sources, []
            for m, v in rec.metrics.items():
                values += (run_id, m, float(v), sources.get(m, "backend"))
            insert_rows(db, "samples (run_id, metric, value, source)", 4, values)
        if rec.excluded:
            insert_rows(db, "exclusions (run_id, metric, reason)", 3,
                        [x for m, r in rec.excluded.items() for x in (run_id, m, r)])
        if rec.profile:
            insert_rows(db, "profile_shares (run_id, key, share)", 3,
                        [x for k, v in rec.profile.items() for x in (run_id, k, float(v))])
        return run_id

    def fresh_meta(self, session: int, workload: str, rec: RunRecord) -> dict[tuple[int, str, str], tuple]:
        """The units and directions of ``rec`` not yet written for this session and workload (or changed)."""
        if self.meta_last.get((session, workload)) == rec.meta:  # the last run's, as runs of a workload are
            return {}
        fresh = {}
        for m, v in rec.meta.items():
            entry = (v.unit, v.higher_is_better, v.exact, v.origin)
            if self.meta_seen.get((session, workload, m)) != entry:
                fresh[(session, workload, m)] = entry
        return fresh

    def write_meta(self, db, session: int, workload: str, rec: RunRecord) -> dict[tuple[int, str, str], tuple]:
        """Write the new or changed units and directions (``fresh_meta``); what was written."""
        fresh = self.fresh_meta(session, workload, rec)
        if not fresh:
            return fresh
        exp_id = db.execute("SELECT experiment_id FROM sessions WHERE id = ?", (session,)).fetchone()[0]
        db.executemany(
            "INSERT OR REPLACE INTO metric_meta (experiment_id, workload, metric, unit, higher_is_better, exact, "
            "source) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(exp_id, workload, m, unit, None if hib is None else int(hib), int(exact), source)
             for (_, _, m), (unit, hib, exact, source) in fresh.items()])
        return fresh


ROWS_PER_INSERT = 240  # rows of one multi-row INSERT: below SQLite's oldest limit of 999 parameters at 4 a row


def insert_rows(db, into: str, width: int, values: list) -> None:
    """Insert rows of ``width`` values each, given one after another in ``values``, ``ROWS_PER_INSERT`` at a
    time: one statement for the few samples of a run, where ``executemany`` binds and steps each row apart."""
    step = width * ROWS_PER_INSERT
    for at in range(0, len(values), step):
        chunk = values[at:at + step]
        db.execute(_insert_sql(into, width, len(chunk) // width), chunk)


@lru_cache(maxsize=64)
def _insert_sql(into: str, width: int, rows: int) -> str:
    row = "(" + ", ".join("?" * width) + ")"
    return f"INSERT INTO {into} VALUES " + ", ".join([row] * rows)


def run_values(rec: RunRecord) -> tuple:
    """The run row's values from ``started_at`` on (``RUN_COLUMNS``; the planned id and its attempt come first)."""
    return (rec.started_at, rec.status, rec.reason, rec.wall_s, rec.user_s, rec.sys_s, rec.max_rss_kb,
            rec.nvcsw, rec.nivcsw, rec.exit_code, rec.signal, int(rec.timed_out), rec.stdout, rec.stderr,
            rec.stdout_bytes, rec.stderr_bytes, _notes_json(rec.notes))


def _notes_json(notes: tuple[str, ...]) -> str:
    """A run's notes as stored: most runs have none."""
    return json.dumps(list(notes)) if notes else "[]"
