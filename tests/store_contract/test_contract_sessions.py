"""Sessions, claims and attempts: both stores answer the same way (each test runs on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from contract_helpers import child, plan, record, start
from perfab.errors import StoreError, UsageError
from perfab.store import ResultStore


def test_both_are_result_stores(stores):
    assert isinstance(stores(), ResultStore)


def test_a_session_records_its_machine_and_whole_plan(stores):
    store = stores(machine="rack3-07")
    session = start(store)
    (s,) = store.sessions("contract")
    assert (s.id, s.host, s.status, s.side, s.backend) == (session, "rack3-07", "running", None, "time")
    assert json.loads(s.owner)["host"] == "rack3-07"
    assert s.environment["cpu.model"] == "Contract CPU" and s.environment["kernel.release"] == "6.1.0-contract"
    assert s.sources == {"a": {"commit": "abc"}}
    assert store.planned(session) == plan() == store.remaining(session)
    assert store.machine == "rack3-07"


def test_the_default_machine_is_the_host_name(stores):
    import socket

    store = stores()
    start(store)
    assert store.machine == socket.gethostname() == store.sessions("contract")[0].host


def test_a_resume_never_picks_up_another_machines_session(stores):
    mine, theirs = stores(machine="m1"), stores(machine="m2")
    session = start(mine)
    assert theirs.unfinished_session("contract") is None
    assert mine.unfinished_session("contract").id == session
    mine.finish_session(session, "interrupted")
    assert mine.unfinished_session("contract").id == session and theirs.unfinished_session("contract") is None


def test_a_finished_or_complete_session_is_not_resumed(stores):
    store = stores(machine="m1")
    session = start(store, runs=2)
    for p in plan(2):
        store.record_run(session, p, record())
    assert store.remaining(session) == [] and store.unfinished_session("contract") is None


def test_claim_refused_while_the_holder_runs_and_granted_once_it_is_gone(stores, db):
    holder = subprocess.Popen(_holder_argv(db), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        session = int(holder.stdout.readline())
        me = stores(machine="here")
        with pytest.raises(StoreError) as info:
            me.claim(session)
        assert f"is being run by pid {holder.pid} on here" in str(info.value)
    finally:
        holder.kill()
        holder.wait()
    me.claim(session)  # its holder is dead: granted
    assert json.loads(me.sessions("contract")[0].owner)["pid"] != holder.pid
    me.record_run(session, plan()[0], record())


def _holder_argv(db: str) -> list[str]:
    body = ("from perfab.plan import PlannedRun\n"
            "p = [PlannedRun(i, 'w', 'ab'[i % 2], 0, i == 0, i // 2, ()) for i in range(4)]\n"
            "s = store.start_session('contract', 'spec', 'c.toml', 'h', None, 'time', ((),), {}, p)\n"
            "print(s, flush=True)\ninput()")
    return child(db, body)


def test_a_claim_from_another_machine_cannot_be_checked_until_taken_over(stores):
    first, second = stores(machine="m1"), stores(machine="m2")
    session = start(first)
    with pytest.raises(StoreError) as info:
        second.claim(session)
    assert "cannot be checked from here" in str(info.value) and "--takeover" in str(info.value)
    second.claim(session, takeover=True)
    with pytest.raises(StoreError) as info:
        first.record_run(session, plan()[0], record())
    assert "no longer this runner's" in str(info.value) and "on m2" in str(info.value)
    assert second.record_run(session, plan()[0], record()) > 0


def test_attempts_are_kept_and_the_newest_counts(stores):
    store = stores()
    session = start(store)
    first = store.record_run(session, plan()[1], record("interrupted", metrics={}))
    assert [p.seq for p in store.remaining(session)] == [0, 1, 2, 3]  # an interrupted run is run again
    second = store.record_run(session, plan()[1], record(ops=120.0))
    every = store.run_rows("contract", all_attempts=True)
    assert [(r["run_id"], r["seq"], r["attempt"], r["status"]) for r in every] == \
        [(first, 1, 1, "interrupted"), (second, 1, 2, "ok")]
    assert [(r["run_id"], r["attempt"]) for r in store.run_rows("contract")] == [(second, 2)]
    data = store.load("contract")
    assert [r.run_id for r in data.runs] == [second] and data.values == {second: {"ops": 120.0, "wall_s": 0.5}}
    assert [p.seq for p in store.remaining(session)] == [0, 2, 3]


def test_finish_releases_the_claim_only_for_its_holder(stores):
    first, second = stores(machine="m1"), stores(machine="m2")
    session = start(first)
    second.finish_session(session, "finished")  # not the holder: nothing changes
    assert first.sessions("contract")[0].status == "running"
    first.finish_session(session, "interrupted")
    (s,) = second.sessions("contract")
    assert s.status == "interrupted" and s.owner is None
    second.claim(session)  # released: anyone may claim it
    assert json.loads(second.sessions("contract")[0].owner)["host"] == "m2"


def test_unknown_names_are_usage_errors_naming_the_known(stores):
    store = stores()
    start(store, "alpha")
    with pytest.raises(UsageError) as info:
        store.load("beta")
    assert "no experiment named 'beta'" in str(info.value) and "known: alpha" in str(info.value)
    with pytest.raises(UsageError):
        store.claim(999)
    with pytest.raises(UsageError):
        store.output(999)


def test_a_read_only_store_refuses_every_write(stores):
    start(stores())
    reader = stores(readonly=True)
    with pytest.raises(StoreError) as info:
        start(reader, "another")
    assert "opened read-only" in str(info.value)
    assert reader.experiments() == ["contract"]


def test_an_empty_database_is_no_results_database_for_a_reader(stores):
    with pytest.raises(UsageError):
        stores(readonly=True)


def test_a_claim_waits_for_a_claim_in_flight_and_then_loses(stores, db):
    """Claiming is read-then-write: the read of a session's claim inside a write holds the session until commit."""
    store = stores(machine="here")
    session = start(store)
    store.finish_session(session, "interrupted")  # unclaimed, resumable
    body = (f"from perfab.errors import StoreError\n"
            f"try:\n    store.claim({session}); print('won', flush=True)\n"
            f"except StoreError as e:\n    print('lost', flush=True)\n")
    with store.transaction():  # this runner's claim, slowed down between its read and its write
        assert store.db.execute("SELECT owner FROM sessions WHERE id = ?", (session,)).fetchone()[0] is None
        racer = subprocess.Popen(child(db, body), stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)  # the racer starts and reaches its claim meanwhile
        store.db.execute("UPDATE sessions SET owner = ?, status = 'running' WHERE id = ?",
                         (store._me.to_json(), session))
    try:
        assert racer.stdout.readline().strip() == "lost"
    finally:
        racer.kill()
        racer.wait()
    assert json.loads(store.sessions("contract")[0].owner)["pid"] == store._me.pid


def test_the_footprint_counts_runs_samples_and_every_table(stores):
    from perfab.store.footprint import describe, footprint

    store = stores()
    session = start(store)
    for p in plan():
        store.record_run(session, p, record(stdout=b"x" * 1000))
    fp = footprint(store)
    assert (fp.runs, fp.samples, fp.output_bytes) == (4, 8, 4000)
    assert {"runs", "samples", "sessions", "planned_runs"} <= set(fp.tables) and fp.tables["runs"] > 4000
    assert fp.per_run() == fp.total / 4 and describe(fp)[-1].startswith("bytes per run: ")


def test_measured_facts_join_the_session_environment(stores):
    """What the runner measures over a session (other work, ``busy.*``) is added to its snapshot, never replacing it."""
    store = stores(machine="m1")
    session = start(store)
    store.add_environment(session, {"busy.other_cpu_s": "1.5", "busy.runs": "4"})
    store.add_environment(session, {"busy.other_cpu_s": "2.5"})
    (s,) = store.sessions("contract")
    assert s.environment["busy.other_cpu_s"] == "2.5" and s.environment["busy.runs"] == "4"
    assert s.environment["cpu.model"] == "Contract CPU"
    with pytest.raises(UsageError):
        store.add_environment(session + 99, {"busy.runs": "1"})


def test_a_parser_only_fix_replaces_the_sessions_spec_for_its_runner_only(stores):
    store, other = stores(machine="m1"), stores(machine="m2")
    session = start(store)
    with pytest.raises(StoreError):
        other.replace_spec(session, "[experiment]\nname = 'other'\n", "feed")  # claimed by m1
    store.replace_spec(session, "[experiment]\nname = 'contract'\n# fixed parser\n", "abcd")
    (s,) = store.sessions("contract")
    assert s.spec_text.endswith("# fixed parser\n")
