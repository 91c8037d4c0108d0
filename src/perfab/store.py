"""Stage 4: the results store, one SQLite file (``.perfab/results.db``).

Every run is committed the moment it ends (WAL journal), so killing perfab
loses at most the run in flight, and ``perfab run --resume`` continues the
stored plan.  The schema version lives in ``PRAGMA user_version``; each
migration applied is also recorded in the ``migrations`` table.

Schema history:
  1  experiments, sessions (spec text, side, environment snapshot, status),
     planned_runs, runs (rusage, status, verbatim output up to a cap),
     samples (run, metric, value), exclusions (run, metric, reason),
     metric_meta (unit and direction as the parser/backend reported them).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from perfab.errors import StoreError, UsageError
from perfab.plan import PlannedRun

_SCHEMA_V1 = """
CREATE TABLE experiments (
    id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, created_at REAL NOT NULL);
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY, experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    started_at REAL NOT NULL, finished_at REAL, status TEXT NOT NULL,
    side TEXT, spec_path TEXT, spec_text TEXT NOT NULL, spec_hash TEXT NOT NULL,
    backend TEXT NOT NULL, groups_json TEXT NOT NULL, environment_json TEXT NOT NULL);
CREATE TABLE planned_runs (
    id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL REFERENCES sessions(id),
    seq INTEGER NOT NULL, workload TEXT NOT NULL, variant TEXT NOT NULL,
    grp INTEGER NOT NULL, warmup INTEGER NOT NULL, block INTEGER NOT NULL,
    UNIQUE (session_id, seq));
CREATE TABLE runs (
    id INTEGER PRIMARY KEY, planned_id INTEGER UNIQUE NOT NULL REFERENCES planned_runs(id),
    started_at REAL NOT NULL, status TEXT NOT NULL, reason TEXT,
    wall_s REAL, user_s REAL, sys_s REAL, max_rss_kb INTEGER, nvcsw INTEGER, nivcsw INTEGER,
    exit_code INTEGER, signal INTEGER, timed_out INTEGER NOT NULL DEFAULT 0,
    stdout BLOB, stderr BLOB, stdout_bytes INTEGER, stderr_bytes INTEGER, notes_json TEXT);
CREATE TABLE samples (
    run_id INTEGER NOT NULL REFERENCES runs(id), metric TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (run_id, metric));
CREATE TABLE exclusions (
    run_id INTEGER NOT NULL REFERENCES runs(id), metric TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (run_id, metric));
CREATE TABLE metric_meta (
    experiment_id INTEGER NOT NULL REFERENCES experiments(id), workload TEXT NOT NULL,
    metric TEXT NOT NULL, unit TEXT, higher_is_better INTEGER, exact INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (experiment_id, workload, metric));
CREATE INDEX runs_by_planned ON runs(planned_id);
CREATE INDEX planned_by_session ON planned_runs(session_id);
"""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "initial schema", _SCHEMA_V1),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


@dataclass(frozen=True)
class RunRecord:
    """One finished (or failed) run, as stored."""

    status: str  # ok | failed | interrupted
    reason: str | None  # why a run failed, in words
    started_at: float  # unix time the run began
    wall_s: float | None  # elapsed time from spawn to reap
    user_s: float | None  # user CPU time of the workload (wait4 rusage)
    sys_s: float | None  # system CPU time of the workload
    max_rss_kb: int | None  # peak resident set size
    nvcsw: int | None  # voluntary context switches
    nivcsw: int | None  # involuntary context switches
    exit_code: int | None  # exit status when it exited
    signal: int | None  # signal number when a signal killed it
    timed_out: bool  # killed by perfab at the workload's timeout
    stdout: bytes  # the first stdout_cap bytes of stdout
    stderr: bytes  # the first stdout_cap bytes of stderr
    stdout_bytes: int  # total bytes written to stdout
    stderr_bytes: int  # total bytes written to stderr
    metrics: dict[str, float] = field(default_factory=dict)  # measured values
    excluded: dict[str, str] = field(default_factory=dict)  # metric -> reason it is unusable in this run
    notes: tuple[str, ...] = ()  # facts the backend reported
    meta: dict[str, tuple[str | None, bool | None, bool]] = field(default_factory=dict)  # metric -> (unit, higher_is_better, exact)


@dataclass(frozen=True)
class Session:
    """A stored session: one invocation of ``perfab run``."""

    id: int  # session id
    experiment: str  # experiment name
    started_at: float  # unix time
    status: str  # running | finished | interrupted | aborted
    side: str | None  # the external side this session ran, None when all sides ran
    spec_text: str  # the spec as it was
    spec_path: str  # where it was read from
    backend: str  # time | perf | cachegrind
    groups: tuple[tuple[str, ...], ...]  # counter groups
    environment: dict[str, str]  # machine snapshot


class Store:
    """A results database; open with ``Store(path)`` and close with ``close()``."""

    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        self._meta_seen: dict[tuple[int, str, str], tuple] = {}
        if not self.path.exists():
            if not create:
                raise UsageError(f"{self.path}: no results database here; run an experiment first "
                                 "(perfab run SPEC) or pass --db PATH")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._refuse_newer()  # before any pragma writes to the file
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not a usable perfab database ({e}); pass another --db PATH") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _refuse_newer(self) -> None:
        """Leave a database of a newer schema untouched (switching it to WAL would rewrite its header)."""
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self.db.close()
            raise StoreError(f"{self.path}: written by a newer perfab (schema {version}, this one knows "
                             f"{SCHEMA_VERSION}); upgrade perfab or pass another --db PATH")

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            self.db.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, "
                            "description TEXT NOT NULL, applied_at REAL NOT NULL)")
        for number, description, sql in MIGRATIONS:
            if number <= version:
                continue
            with self.transaction():
                for statement in sql.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute("INSERT INTO migrations VALUES (?, ?, ?)", (number, description, time.time()))
                self.db.execute(f"PRAGMA user_version = {number}")

    def transaction(self):
        return _Transaction(self.db)

    # -- writing ------------------------------------------------------------

    def start_session(self, name: str, spec_text: str, spec_path: str, spec_hash: str, side: str | None,
                      backend: str, groups: tuple[tuple[str, ...], ...], environment: dict[str, str],
                      plan: list[PlannedRun]) -> int:
        """Store a new session and its whole plan before any run happens."""
        with self.transaction():
            self.db.execute("INSERT OR IGNORE INTO experiments (name, created_at) VALUES (?, ?)", (name, time.time()))
            exp_id = self._experiment_id(name)
            cur = self.db.execute(
                "INSERT INTO sessions (experiment_id, started_at, status, side, spec_path, spec_text, spec_hash, "
                "backend, groups_json, environment_json) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                (exp_id, time.time(), side, spec_path, spec_text, spec_hash, backend, json.dumps(groups),
                 json.dumps(environment, sort_keys=True)))
            session = cur.lastrowid
            self.db.executemany(
                "INSERT INTO planned_runs (session_id, seq, workload, variant, grp, warmup, block) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(session, p.seq, p.workload, p.variant, p.group, int(p.warmup), p.block) for p in plan])
        return session

    def record_run(self, session: int, planned: PlannedRun, rec: RunRecord) -> int:
        """Commit one run with its samples; returns the run id.

        A run stored before for the same planned run (one abandoned at
        SIGINT, run again by ``--resume``) is replaced.
        """
        with self.transaction():
            pid = self.db.execute("SELECT id FROM planned_runs WHERE session_id = ? AND seq = ?",
                                  (session, planned.seq)).fetchone()[0]
            old = self.db.execute("SELECT id FROM runs WHERE planned_id = ?", (pid,)).fetchone()
            if old is not None:
                for table in ("samples", "exclusions", "runs"):
                    self.db.execute(f"DELETE FROM {table} WHERE {'id' if table == 'runs' else 'run_id'} = ?", old)
            cur = self.db.execute(
                "INSERT INTO runs (planned_id, started_at, status, reason, wall_s, user_s, sys_s, max_rss_kb, "
                "nvcsw, nivcsw, exit_code, signal, timed_out, stdout, stderr, stdout_bytes, stderr_bytes, "
                "notes_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pid, rec.started_at, rec.status, rec.reason, rec.wall_s, rec.user_s, rec.sys_s, rec.max_rss_kb,
                 rec.nvcsw, rec.nivcsw, rec.exit_code, rec.signal, int(rec.timed_out), rec.stdout, rec.stderr,
                 rec.stdout_bytes, rec.stderr_bytes, json.dumps(list(rec.notes))))
            run_id = cur.lastrowid
            self.db.executemany("INSERT INTO samples VALUES (?, ?, ?)",
                                [(run_id, m, float(v)) for m, v in rec.metrics.items()])
            if rec.excluded:
                self.db.executemany("INSERT INTO exclusions VALUES (?, ?, ?)",
                                    [(run_id, m, r) for m, r in rec.excluded.items()])
            self._record_meta(session, planned.workload, rec.meta)
        return run_id

    def _record_meta(self, session: int, workload: str, meta: dict) -> None:
        """Units and directions, written when they are new or changed (rarely after the first run)."""
        fresh = {m: v for m, v in meta.items() if self._meta_seen.get((session, workload, m)) != v}
        if not fresh:
            return
        exp_id = self.db.execute("SELECT experiment_id FROM sessions WHERE id = ?", (session,)).fetchone()[0]
        self.db.executemany("INSERT OR REPLACE INTO metric_meta VALUES (?, ?, ?, ?, ?, ?)",
                            [(exp_id, workload, m, unit, None if hib is None else int(hib), int(exact))
                             for m, (unit, hib, exact) in fresh.items()])
        self._meta_seen.update({(session, workload, m): v for m, v in fresh.items()})

    def finish_session(self, session: int, status: str) -> None:
        with self.transaction():
            self.db.execute("UPDATE sessions SET status = ?, finished_at = ? WHERE id = ?",
                            (status, time.time(), session))

    # -- reading ------------------------------------------------------------

    def _experiment_id(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM experiments WHERE name = ?", (name,)).fetchone()
        if row is None:
            known = [r[0] for r in self.db.execute("SELECT name FROM experiments ORDER BY id")]
            hint = f"known: {', '.join(known)}" if known else "this database holds none yet: run it first"
            raise UsageError(f"{self.path}: no experiment named {name!r}; {hint}")
        return row[0]

    def experiments(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM experiments ORDER BY id")]

    def latest_experiment(self) -> str:
        row = self.db.execute("SELECT e.name FROM sessions s JOIN experiments e ON e.id = s.experiment_id "
                              "ORDER BY s.id DESC LIMIT 1").fetchone()
        if row is None:
            raise UsageError(f"{self.path}: holds no experiment yet; run one first (perfab run SPEC)")
        return row[0]

    def sessions(self, name: str) -> list[Session]:
        exp_id = self._experiment_id(name)
        rows = self.db.execute("SELECT id, started_at, status, side, spec_text, spec_path, backend, groups_json, "
                               "environment_json FROM sessions WHERE experiment_id = ? ORDER BY id", (exp_id,))
        return [Session(r[0], name, r[1], r[2], r[3], r[4], r[5] or "", r[6],
                        tuple(tuple(g) for g in json.loads(r[7])), json.loads(r[8])) for r in rows]

    def unfinished_session(self, name: str) -> Session | None:
        """The newest session of ``name`` whose plan is not complete."""
        try:
            sessions = self.sessions(name)
        except UsageError:
            return None
        for s in reversed(sessions):
            if s.status != "finished" and self.remaining(s.id):
                return s
        return None

    def remaining(self, session: int) -> list[PlannedRun]:
        """Planned runs of ``session`` without a stored ok or failed result."""
        rows = self.db.execute(
            "SELECT p.seq, p.workload, p.variant, p.grp, p.warmup, p.block FROM planned_runs p "
            "LEFT JOIN runs r ON r.planned_id = p.id AND r.status != 'interrupted' "
            "WHERE p.session_id = ? AND r.id IS NULL ORDER BY p.seq", (session,))
        return [PlannedRun(r[0], r[1], r[2], r[3], bool(r[4]), r[5]) for r in rows]

    def run_rows(self, name: str) -> list[dict]:
        """Every run of an experiment with its plan position, as dicts."""
        exp_id = self._experiment_id(name)
        cur = self.db.execute(
            "SELECT r.id AS run_id, s.id AS session, s.side AS session_side, p.seq, p.workload, p.variant, "
            "p.grp AS grp, p.warmup, p.block, r.started_at, r.status, r.reason, r.wall_s, r.user_s, r.sys_s, "
            "r.max_rss_kb, r.nvcsw, r.nivcsw, r.exit_code, r.signal, r.timed_out, r.stdout_bytes, "
            "r.stderr_bytes, r.notes_json FROM runs r JOIN planned_runs p ON p.id = r.planned_id "
            "JOIN sessions s ON s.id = p.session_id WHERE s.experiment_id = ? ORDER BY s.id, p.seq", (exp_id,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur]

    def samples(self, name: str) -> list[tuple[int, str, float]]:
        exp_id = self._experiment_id(name)
        return self.db.execute(
            "SELECT sa.run_id, sa.metric, sa.value FROM samples sa JOIN runs r ON r.id = sa.run_id "
            "JOIN planned_runs p ON p.id = r.planned_id JOIN sessions s ON s.id = p.session_id "
            "WHERE s.experiment_id = ? ORDER BY sa.run_id", (exp_id,)).fetchall()

    def exclusions(self, name: str) -> list[tuple[int, str, str]]:
        exp_id = self._experiment_id(name)
        return self.db.execute(
            "SELECT x.run_id, x.metric, x.reason FROM exclusions x JOIN runs r ON r.id = x.run_id "
            "JOIN planned_runs p ON p.id = r.planned_id JOIN sessions s ON s.id = p.session_id "
            "WHERE s.experiment_id = ?", (exp_id,)).fetchall()

    def metric_meta(self, name: str) -> dict[tuple[str, str], tuple[str | None, bool | None, bool]]:
        exp_id = self._experiment_id(name)
        rows = self.db.execute("SELECT workload, metric, unit, higher_is_better, exact FROM metric_meta "
                               "WHERE experiment_id = ?", (exp_id,))
        return {(w, m): (u, None if h is None else bool(h), bool(x)) for w, m, u, h, x in rows}

    def output(self, run_id: int) -> tuple[bytes, bytes]:
        row = self.db.execute("SELECT stdout, stderr FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"{self.path}: no run {run_id}")
        return row[0] or b"", row[1] or b""


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, *rest):
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")


@dataclass(frozen=True)
class Results:
    """The runs and samples of one experiment, for notebooks (``perfab.load``)."""

    experiment: str  # experiment name
    runs: list[dict]  # one dict per run (see Store.run_rows)
    samples: list[dict]  # one dict per (run, metric, value), with workload and variant

    def to_pandas(self):
        """Samples joined with their runs as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas as pd
        except ImportError:
            raise UsageError("to_pandas() needs pandas; pip install pandas") from None
        return pd.DataFrame(self.samples)


def open_results(db: str | Path, experiment: str | None = None) -> Results:
    """Load an experiment's runs and samples from ``db`` (the newest experiment by default)."""
    with Store(db, create=False) as store:
        name = experiment or store.latest_experiment()
        runs = store.run_rows(name)
        by_id = {r["run_id"]: r for r in runs}
        samples = [{"run_id": rid, "workload": by_id[rid]["workload"], "variant": by_id[rid]["variant"],
                    "seq": by_id[rid]["seq"], "warmup": bool(by_id[rid]["warmup"]), "metric": m, "value": v}
                   for rid, m, v in store.samples(name)]
        return Results(name, runs, samples)
