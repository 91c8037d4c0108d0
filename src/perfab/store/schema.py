"""The results database's schema, versioned in code.

The version lives in ``PRAGMA user_version``; every migration applied is
also a row of the ``migrations`` table (version, description, time).  A
database of a newer version is refused untouched; read-only commands never
migrate a file (they migrate an in-memory copy instead).

Schema history:
  1  experiments, sessions (spec text, side, environment snapshot, status),
     planned_runs, runs (rusage, status, verbatim output up to a cap),
     samples (run, metric, value), exclusions (run, metric, reason),
     metric_meta (unit and direction as the parser/backend reported them).
  2  runs are never replaced: ``runs.attempt`` numbers the attempts of a
     planned run, the newest counts and the earlier ones stay;
     ``sessions.owner`` (JSON: host, boot id, pid, process start) claims a
     session for one runner; ``sessions.host`` and ``sessions.sources``
     (commits and builds per side); ``planned_runs.params`` (a sweep
     point, JSON); ``samples.source`` and ``metric_meta.source`` (rusage,
     backend, parser, service, machine); profile shares moved out of
     ``samples`` into ``profile_shares``.
  3  ``sessions.stop_reason``: why a sequential session (runs = "auto")
     stopped; an index of sessions by experiment.
  4  ``sessions.design_json``: how the session was planned (runs, warm-up,
     order, seed, the sequential design or null, each workload's definition
     digest and parser), so resuming and comparing it read no spec text;
     NULL for a session stored before (``perfab.specfile.stored`` reads its text).
  5  ``samples``, ``exclusions`` and ``profile_shares`` are kept in their
     primary key's order (WITHOUT ROWID), and ``runs_by_planned``, a copy of
     the UNIQUE (planned_id, attempt) index, is dropped: a stored run writes
     three B-tree pages instead of five (the same rows, in less space).
  6  ``planned_runs.rep``: a run's place among its cell's measured runs (warm-ups
     negative), which names its boot and its perturbation (``perfab.replication``);
     NULL for a run planned before (the analysis then takes every run as its own
     unit).  The session's replication (unit, boots, seed) is in its design.
"""

from __future__ import annotations

# samples.source and metric_meta.source: where a sample came from, one of rusage, backend, parser, service, machine

_V1 = """
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

_RUSAGE_V1 = "('wall_s', 'user_s', 'sys_s', 'max_rss_kb', 'vcsw', 'ivcsw')"

# SQLite cannot drop a UNIQUE constraint: runs is rebuilt (create, copy, drop, rename),
# with foreign keys off for the rebuild (set by the migrator outside the transaction).
_V2 = f"""
ALTER TABLE sessions ADD COLUMN owner TEXT;
ALTER TABLE sessions ADD COLUMN host TEXT;
ALTER TABLE sessions ADD COLUMN sources_json TEXT NOT NULL DEFAULT '{{}}';
ALTER TABLE planned_runs ADD COLUMN params_json TEXT NOT NULL DEFAULT '{{}}';
CREATE TABLE runs_v2 (
    id INTEGER PRIMARY KEY, planned_id INTEGER NOT NULL REFERENCES planned_runs(id),
    attempt INTEGER NOT NULL DEFAULT 1,
    started_at REAL NOT NULL, status TEXT NOT NULL, reason TEXT,
    wall_s REAL, user_s REAL, sys_s REAL, max_rss_kb INTEGER, nvcsw INTEGER, nivcsw INTEGER,
    exit_code INTEGER, signal INTEGER, timed_out INTEGER NOT NULL DEFAULT 0,
    stdout BLOB, stderr BLOB, stdout_bytes INTEGER, stderr_bytes INTEGER, notes_json TEXT,
    UNIQUE (planned_id, attempt));
INSERT INTO runs_v2 (id, planned_id, attempt, started_at, status, reason, wall_s, user_s, sys_s, max_rss_kb,
    nvcsw, nivcsw, exit_code, signal, timed_out, stdout, stderr, stdout_bytes, stderr_bytes, notes_json)
    SELECT id, planned_id, 1, started_at, status, reason, wall_s, user_s, sys_s, max_rss_kb, nvcsw, nivcsw,
    exit_code, signal, timed_out, stdout, stderr, stdout_bytes, stderr_bytes, notes_json FROM runs;
DROP INDEX runs_by_planned;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
CREATE INDEX runs_by_planned ON runs(planned_id, attempt);
CREATE TABLE profile_shares (
    run_id INTEGER NOT NULL REFERENCES runs(id), key TEXT NOT NULL, share REAL NOT NULL,
    PRIMARY KEY (run_id, key));
INSERT INTO profile_shares SELECT run_id, metric, value FROM samples WHERE metric LIKE 'self.%';
DELETE FROM samples WHERE metric LIKE 'self.%';
ALTER TABLE samples ADD COLUMN source TEXT NOT NULL DEFAULT 'backend';
UPDATE samples SET source = 'rusage' WHERE metric IN {_RUSAGE_V1};
ALTER TABLE metric_meta ADD COLUMN source TEXT NOT NULL DEFAULT 'backend';
UPDATE metric_meta SET source = 'rusage' WHERE metric IN {_RUSAGE_V1};
DELETE FROM metric_meta WHERE metric LIKE 'self.%';
"""

_V3 = """
ALTER TABLE sessions ADD COLUMN stop_reason TEXT;
CREATE INDEX sessions_by_experiment ON sessions(experiment_id);
"""

_V4 = """
ALTER TABLE sessions ADD COLUMN design_json TEXT;
"""

# Tables of small rows read by their key: stored in the key's order (no rowid and no second B-tree for the key).
_V5 = """
DROP INDEX IF EXISTS runs_by_planned;
CREATE TABLE samples_v5 (
    run_id INTEGER NOT NULL REFERENCES runs(id), metric TEXT NOT NULL, value REAL NOT NULL,
    source TEXT NOT NULL DEFAULT 'backend', PRIMARY KEY (run_id, metric)) WITHOUT ROWID;
INSERT INTO samples_v5 (run_id, metric, value, source) SELECT run_id, metric, value, source FROM samples;
DROP TABLE samples;
ALTER TABLE samples_v5 RENAME TO samples;
CREATE TABLE exclusions_v5 (
    run_id INTEGER NOT NULL REFERENCES runs(id), metric TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (run_id, metric)) WITHOUT ROWID;
INSERT INTO exclusions_v5 (run_id, metric, reason) SELECT run_id, metric, reason FROM exclusions;
DROP TABLE exclusions;
ALTER TABLE exclusions_v5 RENAME TO exclusions;
CREATE TABLE profile_shares_v5 (
    run_id INTEGER NOT NULL REFERENCES runs(id), key TEXT NOT NULL, share REAL NOT NULL,
    PRIMARY KEY (run_id, key)) WITHOUT ROWID;
INSERT INTO profile_shares_v5 (run_id, key, share) SELECT run_id, key, share FROM profile_shares;
DROP TABLE profile_shares;
ALTER TABLE profile_shares_v5 RENAME TO profile_shares;
"""

_V6 = """
ALTER TABLE planned_runs ADD COLUMN rep INTEGER;
"""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "initial schema", _V1),
    (2, "attempts kept, sessions claimed, sweep points, sample sources, profile shares", _V2),
    (3, "why a sequential session stopped; sessions indexed by experiment", _V3),
    (4, "each session's design (runs, order, sequential)", _V4),
    (5, "samples, exclusions and profile shares in key order; the duplicate runs index dropped", _V5),
    (6, "each planned run's place among its cell's runs: its boot and perturbation", _V6),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
PERFAB_TABLES = frozenset({"migrations", "experiments", "sessions", "planned_runs", "runs", "samples"})


def statements(sql: str) -> list[str]:
    """The statements of a migration script (none of them contains a ';' inside a literal)."""
    return [s.strip() for s in sql.split(";") if s.strip()]
