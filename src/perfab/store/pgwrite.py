"""Storing one run on PostgreSQL in one round trip.

A round trip to the server costs more than the SQL it carries, and the
generic write (``perfab.store.runwrite``) takes five of them (BEGIN, the
claim, the run, its samples, COMMIT).  Here the whole write is one
statement, so one round trip and one transaction (the connection is in
autocommit mode):

- ``claim`` reads the session's owner and locks its row (``FOR UPDATE``):
  a runner taking the session over waits for this write to commit;
- ``run`` inserts the run row only where that owner is this runner's claim
  as stored, the attempt counted in the same statement;
- ``new_samples``, ``new_exclusions`` and ``new_shares`` insert the run's values,
  sent as one JSON array each (a float's shortest repr, which the server
  reads back to the same double), joined to the run just inserted: no run
  row, no values.

The statement answers (the owner read, the new run's id).  Without an id
nothing was written; the claim is then judged as the generic write judges
it (a holder stored with another claim time is still this runner, and gets
the generic write).  A run whose metric units are new or changed for this
session (the first run of a workload) takes the generic write, which also
writes ``metric_meta``.

The commit is the server's: when COMMIT returns, the run is on the server,
so it survives perfab being killed at any instant.  Whether it also
survives a crash of the server's machine is the server's setting
(``fsync``, ``synchronous_commit``; on by default, when each commit waits
for the WAL to be flushed).
"""

from __future__ import annotations

import json

from perfab.plan import PlannedRun
from perfab.store.record import RunRecord
from perfab.store.runwrite import RUN_COLUMNS, RunWriter, run_values

_TYPES = ("bigint", "double precision", "text", "text", "double precision", "double precision",
          "double precision", "bigint", "bigint", "bigint", "bigint", "bigint", "bigint", "bytea", "bytea",
          "bigint", "bigint", "text")  # RUN_COLUMNS but attempt; cast, as an untyped parameter in a SELECT is text

_VALUES = ", ".join(f"%s::{t}" for t in _TYPES)
_COLUMNS = RUN_COLUMNS.replace("planned_id, attempt, ", "")

RECORD = f"""WITH claim AS (SELECT owner FROM sessions WHERE id = %s FOR UPDATE),
run AS (INSERT INTO runs (attempt, planned_id, {_COLUMNS})
        SELECT (SELECT coalesce(max(attempt), 0) + 1 FROM runs WHERE planned_id = v.planned_id), v.*
        FROM claim, (VALUES ({_VALUES})) AS v(planned_id, {_COLUMNS})
        WHERE claim.owner = %s RETURNING id),
new_samples AS (INSERT INTO samples (run_id, metric, value, source)
                SELECT run.id, e->>0, (e->>1)::double precision, e->>2 FROM run, json_array_elements(%s::json) e),
new_exclusions AS (INSERT INTO exclusions (run_id, metric, reason)
                   SELECT run.id, e->>0, e->>1 FROM run, json_array_elements(%s::json) e),
new_shares AS (INSERT INTO profile_shares (run_id, key, share)
               SELECT run.id, e->>0, (e->>1)::double precision FROM run, json_array_elements(%s::json) e)
SELECT (SELECT owner FROM claim), (SELECT id FROM run)"""


class OneTripWriter(RunWriter):
    """``RunWriter`` on PostgreSQL: a run whose metric units are known is stored by one statement (``RECORD``)."""

    def record(self, store, session: int, planned: PlannedRun, rec: RunRecord) -> int:
        if self.fresh_meta(session, planned.workload, rec):
            return super().record(store, session, planned, rec)
        try:
            values = _values(rec)
        except ValueError:  # a value JSON cannot carry (not finite): the generic write stores it as it is
            return super().record(store, session, planned, rec)
        pid = self.planned_id(store.db, session, planned.seq)
        owner, run_id = store.db.execute_raw(RECORD, (session, pid, *run_values(rec), self.mine, *values)).fetchone()
        if run_id is not None:
            self.meta_last[(session, planned.workload)] = rec.meta  # its units were all written before
            return run_id
        self.judge_claim(session, owner)  # StoreError when the session is another runner's
        return super().record(store, session, planned, rec)  # this runner's claim, stored with another time


def _values(rec: RunRecord) -> tuple[str, str, str]:
    """The run's samples, exclusions and profile shares as JSON arrays of rows (``RECORD``'s last three);
    ValueError for a value that is not finite."""
    samples = [(m, float(v), rec.sources.get(m, "backend")) for m, v in rec.metrics.items()]
    shares = [(k, float(v)) for k, v in rec.profile.items()]
    return (json.dumps(samples, allow_nan=False), json.dumps(list(rec.excluded.items())),
            json.dumps(shares, allow_nan=False))
