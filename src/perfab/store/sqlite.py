"""The SQLite results store (``.perfab/results.db``).

Every run is committed the moment it ends (WAL journal), so killing perfab
loses at most the run in flight, and ``perfab run --resume`` continues the
stored plan.  Nothing stored is ever replaced: a planned run that is run
again gets a new attempt row, and the newest attempt counts.  A session is
claimed by one runner (``perfab.store.claims``); a second runner is refused
with the holder's name, and every write checks the claim.  A store acts for
one machine (``machine``, the host name by default): its sessions record it
and only its own unfinished sessions are resumed.

Read-only opening (``readonly=True``, used by ``report`` and ``plan``)
never writes: the file is opened with SQLite's ``mode=ro`` (or
``immutable=1`` for a WAL database without its ``-wal`` file, e.g. on a
read-only archive), a file without perfab's tables is refused, and an
older schema is migrated in an in-memory copy (``perfab.store.sqlitefile``,
which ``perfab list`` uses alone).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from perfab.errors import StoreError, UsageError
from perfab.plan import PlannedRun
from perfab.store.dataset import params_to_json
from perfab.store.claims import claimable, identity, still_mine
from perfab.store.owner import Owner
from perfab.store.reader import Reader
from perfab.store.record import RunRecord
from perfab.store.runwrite import RunWriter
from perfab.store.sqlitefile import Transaction, connect

class Store(Reader):
    """A results database; ``Store(path)`` opens it for writing, ``Store(path, readonly=True)`` for reading.

    ``machine`` names the machine this store acts for (default: the host name).  This class opens the
    file and writes (sessions, their claims, runs); what it answers is ``perfab.store.reader.Reader``'s."""

    def __init__(self, path: str | Path, create: bool = True, readonly: bool = False, machine: str | None = None):
        self._me = identity(machine)
        self._writer = RunWriter(self._me)  # the per-run write and what a session's runs share
        self.machine = self._me.host
        self.readonly = readonly
        self.db = connect(path, create, readonly)  # refused with one line when it cannot be used
        self.path = Path(path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def transaction(self) -> Transaction:
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only; nothing can be written")
        return Transaction(self.db, str(self.path))

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
                "INSERT INTO planned_runs (session_id, seq, workload, variant, grp, warmup, block, params_json, rep) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(session, p.seq, p.workload, p.variant, p.group, int(p.warmup), p.block, params_to_json(p.params),
                  p.rep) for p in plan])
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
                "INSERT INTO planned_runs (session_id, seq, workload, variant, grp, warmup, block, params_json, rep) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(session, p.seq, p.workload, p.variant, p.group, int(p.warmup), p.block, params_to_json(p.params),
                  p.rep) for p in runs])

    def _check_claim(self, session: int) -> None:
        row = self.db.execute("SELECT owner FROM sessions WHERE id = ?", (session,)).fetchone()
        still_mine(session, Owner.from_json(row[0] if row else None), self._me)

    # -- runs ---------------------------------------------------------------

    def record_run(self, session: int, planned: PlannedRun, rec: RunRecord) -> int:
        """Commit one run with its samples as a new attempt of its planned run; returns the run id
        (``perfab.store.runwrite``: one transaction, a few statements)."""
        return self._writer.record(self, session, planned, rec)
