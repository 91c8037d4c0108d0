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
  row, no values.  A part the run has no rows for is left out of its
  statement (one prepared statement per shape; most runs have samples only).

The statement is prepared once per connection and executed through libpq
with its parameters as text (``postgres._Connection.execute_prepared``):
psycopg's cursor, adapting each parameter at every execution, was most of
perfab's own time in the write.  The statement answers (the owner read, the
new run's id).  Without an id nothing was written; the claim is then judged
as the generic write judges it (a holder stored with another claim time is
still this runner, and gets the generic write).  A run whose metric units
are new or changed for this session (the first run of a workload) takes
the generic write, which also writes ``metric_meta``.

The commit is the server's: when COMMIT returns, the run is on the server,
so it survives perfab being killed at any instant.  Whether it also
survives a crash of the server's machine is the server's setting
(``fsync``, ``synchronous_commit``; on by default, when each commit waits
for the WAL to be flushed).
"""

from __future__ import annotations

import json
from functools import lru_cache

from perfab.plan import PlannedRun
from perfab.store.record import RunRecord
from perfab.store.runwrite import RUN_COLUMNS, RunWriter, run_values

_TYPES = ("bigint", "double precision", "text", "text", "double precision", "double precision",
          "double precision", "bigint", "bigint", "bigint", "bigint", "bigint", "bigint", "bytea", "bytea",
          "bigint", "bigint", "text")  # RUN_COLUMNS but attempt; cast, as an untyped parameter in a SELECT is text

_VALUES = ", ".join(f"%s::{t}" for t in _TYPES)
_COLUMNS = RUN_COLUMNS.replace("planned_id, attempt, ", "")

_CLAIM_AND_RUN = f"""WITH claim AS (SELECT owner FROM sessions WHERE id = %s FOR UPDATE),
run AS (INSERT INTO runs (attempt, planned_id, {_COLUMNS})
        SELECT (SELECT coalesce(max(attempt), 0) + 1 FROM runs WHERE planned_id = v.planned_id), v.*
        FROM claim, (VALUES ({_VALUES})) AS v(planned_id, {_COLUMNS})
        WHERE claim.owner = %s RETURNING id)"""
_VALUE_ROWS = (  # samples, exclusions, profile shares: each joined to the run just inserted, from a JSON array
    """new_samples AS (INSERT INTO samples (run_id, metric, value, source)
                SELECT run.id, e->>0, (e->>1)::double precision, e->>2 FROM run, json_array_elements(%s::json) e)""",
    """new_exclusions AS (INSERT INTO exclusions (run_id, metric, reason)
                   SELECT run.id, e->>0, e->>1 FROM run, json_array_elements(%s::json) e)""",
    """new_shares AS (INSERT INTO profile_shares (run_id, key, share)
               SELECT run.id, e->>0, (e->>1)::double precision FROM run, json_array_elements(%s::json) e)""")


def record_statement(has: tuple[bool, bool, bool]) -> str:
    """The one statement for a run with samples, exclusions and profile shares as ``has`` says: an insert a
    run has no rows for is left out (most runs have no exclusion and no profile)."""
    parts = [_CLAIM_AND_RUN, *(part for part, present in zip(_VALUE_ROWS, has) if present)]
    return ",\n".join(parts) + "\nSELECT (SELECT owner FROM claim), (SELECT id FROM run)"


class OneTripWriter(RunWriter):
    """``RunWriter`` on PostgreSQL: a run whose metric units are known is stored by one statement
    (``record_statement``)."""

    def record(self, store, session: int, planned: PlannedRun, rec: RunRecord) -> int:
        if self.fresh_meta(session, planned.workload, rec):
            return super().record(store, session, planned, rec)
        try:
            values = _values(rec)
        except ValueError:  # a value JSON cannot carry (not finite): the generic write stores it as it is
            return super().record(store, session, planned, rec)
        has = tuple(v is not None for v in values)
        name = "perfab_record_run_" + "".join("1" if h else "0" for h in has)
        pid = self.planned_id(store.db, session, planned.seq)
        try:
            owner, run_id = store.db.execute_prepared(name, _statement(has), (session, pid, *run_values(rec),
                                                      self.mine, *(v for v in values if v is not None)))
        except UnicodeEncodeError:  # text the connection's encoding cannot carry: the generic write says so
            return super().record(store, session, planned, rec)
        if run_id is not None:
            self.meta_last[(session, planned.workload)] = rec.meta  # its units were all written before
            return int(run_id)
        self.judge_claim(session, None if owner is None else owner.decode(store.db.conn.info.encoding))
        return super().record(store, session, planned, rec)  # this runner's claim, stored with another time


@lru_cache(maxsize=8)
def _statement(has: tuple[bool, bool, bool]) -> str:
    return record_statement(has)


def _values(rec: RunRecord) -> tuple[str | None, str | None, str | None]:
    """The run's samples, exclusions and profile shares as JSON arrays of rows, None for none (the statement's
    last parameters); ValueError for a value that is not finite."""
    sources = rec.sources
    samples = [(m, float(v), sources.get(m, "backend")) for m, v in rec.metrics.items()]
    shares = [(k, float(v)) for k, v in rec.profile.items()]
    return (json.dumps(samples, allow_nan=False) if samples else None,
            json.dumps(list(rec.excluded.items())) if rec.excluded else None,
            json.dumps(shares, allow_nan=False) if shares else None)
