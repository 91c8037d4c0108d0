"""The read side of a results store: experiments, sessions, plans and runs, and ``load`` as columns.

``Reader`` is mixed into ``perfab.store.sqlite.Store`` (and so into
``PostgresStore``): its queries are written once in SQLite's SQL and
PostgreSQL's connection translates them (``perfab.store.dialect``).
``load`` streams the run and sample rows into columns
(``perfab.store.columns``); every other answer is small.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from perfab.errors import UsageError
from perfab.metrics import Metric, resolve
from perfab.plan import PlannedRun
from perfab.store.dataset import Dataset, Session, group_by_run, params_from_json
from perfab.store.listing import counts

# The newest attempt of each planned run (earlier attempts stay stored, uncounted).
LATEST = "r.attempt = (SELECT max(r2.attempt) FROM runs r2 WHERE r2.planned_id = r.planned_id)"


class Reader:
    """What a store answers about what it holds (needs ``db``, ``path`` and ``machine`` from the store)."""

    db: object  # the connection: execute(sql, params) and stream(sql, params) in SQLite's SQL
    path: Path | str  # the file or URL, named in messages
    machine: str  # the machine this store acts for

    def _experiment_id(self, name: str) -> int:
        row = self.db.execute("SELECT id FROM experiments WHERE name = ?", (name,)).fetchone()
        if row is None:  # name at most 20 (a fleet's store holds thousands)
            known = [r[0] for r in self.db.execute("SELECT name FROM experiments ORDER BY id LIMIT 21")]
            more = ", ..." if len(known) > 20 else ""
            hint = f"known: {', '.join(known[:20])}{more}" if known else "this database holds none yet: run it first"
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
                               "environment_json, host, owner, sources_json, stop_reason, design_json FROM sessions "
                               "WHERE experiment_id = ? ORDER BY id", (exp_id,))
        return [Session(r[0], name, r[1], r[2], r[3], r[4], r[5] or "", r[6],
                        tuple(tuple(g) for g in json.loads(r[7])), json.loads(r[8]), r[9], r[10],
                        json.loads(r[11] or "{}"), r[12], json.loads(r[13]) if r[13] else None) for r in rows]

    def unfinished_session(self, name: str) -> Session | None:
        """The newest session of ``name`` run on this store's machine whose plan is not complete.

        Sessions of other machines (a shared store) are never resumed here: their runs belong to their
        machine's environment."""
        try:
            sessions = self.sessions(name)
        except UsageError:
            return None
        for s in reversed(sessions):
            if s.status != "finished" and s.host in (None, self.machine) and \
                    (self.remaining(s.id) or s.sequential):
                return s
        return None

    def remaining(self, session: int) -> list[PlannedRun]:
        """Planned runs of ``session`` whose newest attempt is missing or was abandoned (interrupted)."""
        rows = self.db.execute(
            "SELECT p.seq, p.workload, p.variant, p.grp, p.warmup, p.block, p.params_json, p.rep FROM planned_runs p "
            f"LEFT JOIN runs r ON r.planned_id = p.id AND {LATEST} "
            "WHERE p.session_id = ? AND (r.id IS NULL OR r.status = 'interrupted') ORDER BY p.seq", (session,))
        return [_planned(r) for r in rows]

    def planned(self, session: int) -> list[PlannedRun]:
        """The whole stored plan of ``session``."""
        rows = self.db.execute("SELECT seq, workload, variant, grp, warmup, block, params_json, rep FROM planned_runs "
                               "WHERE session_id = ? ORDER BY seq", (session,))
        return [_planned(r) for r in rows]

    def overview(self, name: str) -> tuple[int, int, str]:
        """(sessions, counted runs, status of the newest session) of an experiment, counted in SQL.

        The runs are those ``run_rows`` returns: the latest attempt of each
        planned run that has one, so one per planned run with a run stored."""
        return counts(self.db, self._experiment_id(name))  # perfab.store.listing: EXISTS, no set of ids

    def run_rows(self, name: str, all_attempts: bool = False) -> list[dict]:
        """Every counted run of an experiment with its plan position, as dicts (every attempt if asked)."""
        exp_id = self._experiment_id(name)
        latest = "" if all_attempts else f"AND {LATEST}"
        cur = self.db.execute(
            "SELECT r.id AS run_id, s.id AS session, s.side AS session_side, p.seq, r.attempt, p.workload, "
            "p.variant, p.params_json, p.grp AS grp, p.warmup, p.block, r.started_at, r.status, r.reason, r.wall_s, "
            "r.user_s, r.sys_s, r.max_rss_kb, r.nvcsw, r.nivcsw, r.exit_code, r.signal, r.timed_out, "
            "r.stdout_bytes, r.stderr_bytes, r.notes_json FROM runs r JOIN planned_runs p ON p.id = r.planned_id "
            f"JOIN sessions s ON s.id = p.session_id WHERE s.experiment_id = ? {latest} "
            "ORDER BY s.id, p.seq, r.attempt", (exp_id,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]  # one checked fetch, not one per row

    def samples(self, name: str) -> list[tuple[int, str, float]]:
        return [(rid, m, _number(v)) for rid, m, v, _ in self._samples(name)]

    def _samples(self, name: str) -> list[tuple[int, str, float, str]]:
        return self.db.execute(
            "SELECT sa.run_id, sa.metric, sa.value, sa.source FROM samples sa JOIN runs r ON r.id = sa.run_id "
            "JOIN planned_runs p ON p.id = r.planned_id JOIN sessions s ON s.id = p.session_id "
            "WHERE s.experiment_id = ? ORDER BY sa.run_id", (self._experiment_id(name),)).fetchall()

    def exclusions(self, name: str) -> list[tuple[int, str, str]]:
        return self.db.execute(
            "SELECT x.run_id, x.metric, x.reason FROM exclusions x JOIN runs r ON r.id = x.run_id "
            "JOIN planned_runs p ON p.id = r.planned_id JOIN sessions s ON s.id = p.session_id "
            "WHERE s.experiment_id = ?", (self._experiment_id(name),)).fetchall()

    def profile_shares(self, name: str) -> list[tuple[int, str, float]]:
        return self.db.execute(
            "SELECT x.run_id, x.key, x.share FROM profile_shares x JOIN runs r ON r.id = x.run_id "
            "JOIN planned_runs p ON p.id = r.planned_id JOIN sessions s ON s.id = p.session_id "
            "WHERE s.experiment_id = ?", (self._experiment_id(name),)).fetchall()

    def metric_meta(self, name: str) -> dict[tuple[str, str], Metric]:
        rows = self.db.execute("SELECT workload, metric, unit, higher_is_better, exact, source FROM metric_meta "
                               "WHERE experiment_id = ?", (self._experiment_id(name),))
        return {(w, m): resolve(m, unit=u, higher_is_better=None if h is None else bool(h), exact=bool(x), origin=s)
                for w, m, u, h, x, s in rows}

    def output(self, run_id: int) -> tuple[bytes, bytes]:
        row = self.db.execute("SELECT stdout, stderr FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"{self.path}: no run {run_id}")
        return row[0] or b"", row[1] or b""

    def load(self, name: str) -> Dataset:
        """The dataset of experiment ``name`` as columns (see ``perfab.store.dataset``), its rows streamed."""
        from perfab.store.columns import notes_from_json, read_runs, read_samples

        exp_id = self._experiment_id(name)
        table = read_runs(self.db.stream(
            "SELECT r.id, s.id, p.seq, r.attempt, p.workload, p.variant, p.params_json, p.grp, p.warmup, p.block, "
            "r.started_at, r.status, r.reason, r.notes_json, COALESCE(p.rep, 0) FROM runs r "
            "JOIN planned_runs p ON p.id = r.planned_id "
            f"JOIN sessions s ON s.id = p.session_id WHERE s.experiment_id = ? AND {LATEST} "
            "ORDER BY s.id, p.seq, r.attempt", (exp_id,)), params_from_json, notes_from_json)
        samples = read_samples(self.db.stream(
            "SELECT sa.run_id, sa.metric, sa.value FROM samples sa JOIN runs r ON r.id = sa.run_id "
            "JOIN planned_runs p ON p.id = r.planned_id JOIN sessions s ON s.id = p.session_id "
            "WHERE s.experiment_id = ?", (exp_id,)), table)
        counted = set(table.run_id.tolist())
        pick = lambda rows: group_by_run(x for x in rows if x[0] in counted)  # noqa: E731
        return Dataset.of_columns(name, tuple(self.sessions(name)), table, samples, pick(self.exclusions(name)),
                       self.metric_meta(name), pick(self.profile_shares(name)))


def _planned(r) -> PlannedRun:
    """A stored planned run (a run planned before schema 6 has no ``rep``: 0, as its one boot's)."""
    return PlannedRun(r[0], r[1], r[2], r[3], bool(r[4]), r[5], params_from_json(r[6]), 0 if r[7] is None else r[7])


def _number(value) -> float:
    """A stored sample as a float: text or bytes another tool wrote into the REAL column ('nan', 'abc') come
    back as a float or as nan, which the analysis refuses with its reason, never as a string."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
