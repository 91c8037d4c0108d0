"""The per-run write (``perfab.store.runwrite``, and ``perfab.store.pgwrite`` on PostgreSQL) on both stores.

A session's first run writes its metric units and takes the generic write; every later run takes the
short one (on PostgreSQL one statement).  These tests store a run after the first, so both paths are
checked: everything stored reads back exactly, a session taken over refuses the write, a plan that grew
is found.
"""

from __future__ import annotations

import pytest

from contract_helpers import plan, record, start
from perfab.errors import StoreError
from perfab.metrics import resolve
from perfab.plan import PlannedRun

# Floats whose shortest text is long, tiny, huge or negative: each must come back as the same double.
AWKWARD = {"ops": 0.1 + 0.2, "wall_s": 1e-300, "big": 1.7976931348623157e308, "neg": -123456.78901234567,
           "whole": 4096.0, "third": 1 / 3}


def test_a_later_run_stores_every_part_exactly(stores):
    store = stores()
    session = start(store)
    store.record_run(session, plan()[0], record())  # the first run: units written
    rec = record(metrics=AWKWARD, excluded={"max_rss_kb": "not measurable", "ivcsw": "a reason, with 'quotes'"},
                 notes=("first note", "second \"note\""), profile={"self.main": 61.5, "self.λ": 38.5},
                 stdout=b"bytes \x00\xff kept\n", stderr=b"err\n", stdout_bytes=1 << 40, stderr_bytes=4,
                 sources={**{m: "parser" for m in AWKWARD}, "wall_s": "rusage"},
                 meta={"ops": resolve("ops", unit="", higher_is_better=True, origin="parser"),
                       "wall_s": resolve("wall_s")})
    run_id = store.record_run(session, plan()[1], rec)
    assert {m: v for r, m, v in store.samples("contract") if r == run_id} == AWKWARD  # bit for bit: == on floats
    assert {m: why for r, m, why in store.exclusions("contract") if r == run_id} == rec.excluded
    assert {k: v for r, k, v in store.profile_shares("contract") if r == run_id} == rec.profile
    assert store.output(run_id) == (rec.stdout, rec.stderr)
    row = next(r for r in store.run_rows("contract") if r["run_id"] == run_id)
    assert (row["seq"], row["attempt"], row["notes_json"]) == (1, 1, '["first note", "second \\"note\\""]')
    assert (row["stdout_bytes"], row["max_rss_kb"], row["exit_code"], row["signal"]) == (1 << 40, 2048, 0, None)
    sources = store.db.execute("SELECT metric, source FROM samples WHERE run_id = ?", (run_id,)).fetchall()
    assert {tuple(s) for s in sources} == {(m, "rusage" if m == "wall_s" else "parser") for m in AWKWARD}


def test_a_later_attempt_counts_on(stores):
    store = stores()
    session = start(store)
    store.record_run(session, plan()[0], record())
    ids = [store.record_run(session, plan()[1], record("interrupted", metrics={})) for _ in range(2)]
    last = store.record_run(session, plan()[1], record(ops=7.0))
    attempts = [(r["run_id"], r["attempt"]) for r in store.run_rows("contract", all_attempts=True) if r["seq"] == 1]
    assert attempts == [(ids[0], 1), (ids[1], 2), (last, 3)]


def test_a_session_taken_over_refuses_a_later_run_and_stores_nothing(stores):
    first, second = stores(machine="m1"), stores(machine="m2")
    session = start(first)
    kept = first.record_run(session, plan()[0], record())
    second.claim(session, takeover=True)
    with pytest.raises(StoreError) as info:
        first.record_run(session, plan()[1], record())
    assert "no longer this runner's" in str(info.value) and "on m2" in str(info.value)
    assert [r["run_id"] for r in second.run_rows("contract", all_attempts=True)] == [kept]
    assert second.record_run(session, plan()[1], record()) > kept


def test_a_plan_grown_after_runs_were_stored_is_found(stores):
    store = stores()
    session = start(store, runs=2)
    store.record_run(session, plan(2)[0], record())
    with pytest.raises(StoreError, match="has no planned run 2"):
        store.record_run(session, PlannedRun(2, "w", "a", 0, False, 1, ()), record())
    store.extend_plan(session, [PlannedRun(2, "w", "a", 0, False, 1, ()), PlannedRun(3, "w", "b", 0, False, 1, ())])
    run_id = store.record_run(session, PlannedRun(3, "w", "b", 0, False, 1, ()), record(ops=3.0))
    assert [(m, v) for r, m, v in store.samples("contract") if r == run_id and m == "ops"] == [("ops", 3.0)]


def test_a_run_with_more_values_than_one_insert_takes_stores_them_all(stores):
    """Values go in multi-row INSERTs of at most ``ROWS_PER_INSERT`` rows: a run with more, in the first
    run's write and in a later one, keeps every value (SQLite's oldest builds allow 999 parameters)."""
    from perfab.store.runwrite import ROWS_PER_INSERT

    store = stores()
    session = start(store)
    n = 2 * ROWS_PER_INSERT + 7
    metrics = {f"m{i:04d}": i / 7 for i in range(n)}
    for seq in (0, 1):
        rec = record(metrics=metrics, sources={m: "parser" for m in metrics},
                     meta={m: resolve(m, unit="", origin="parser") for m in metrics},
                     excluded={f"x{i:04d}": f"reason {i}" for i in range(n)},
                     profile={f"self.f{i}": 100 / n for i in range(n)})
        run_id = store.record_run(session, plan()[seq], rec)
        assert {m: v for r, m, v in store.samples("contract") if r == run_id} == metrics
        assert {m: why for r, m, why in store.exclusions("contract") if r == run_id} == rec.excluded
        assert {k: v for r, k, v in store.profile_shares("contract") if r == run_id} == rec.profile
