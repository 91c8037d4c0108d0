"""Where a job runs, how it moves, and the one-line refusals of submit and worker (no worker processes)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from perfab.cli import main
from perfab.errors import UsageError
from perfab.fleet.job import BelongsElsewhere, Moves, route
from perfab.fleet.machines import SUBMISSION_KEY
from perfab.fleet.queues import check_name, class_of, machine_queue
from perfab.plan import PlannedRun
from perfab.store import RunRecord, Store

PLAN = [PlannedRun(i, "w", "ab"[i % 2], 0, False, 0, ()) for i in range(2)]


def _session(store, submission: str) -> int:
    return store.start_session("e", "spec", "e.toml", "h", None, "time", ((),), {SUBMISSION_KEY: submission}, PLAN)


def _ok() -> RunRecord:
    return RunRecord("ok", None, 0.0, 1.0, 1.0, 0.0, 1, 0, 0, 0, None, False, b"", b"", 0, 0, {"x": 1.0})


def _finish(store, session: int) -> None:
    for p in PLAN:
        store.record_run(session, p, _ok())
    store.finish_session(session, "finished")


def test_a_job_is_new_resumed_done_or_elsewhere(tmp_path):
    db = tmp_path / "r.db"
    m1, m2 = Store(db, machine="m1"), Store(db, machine="m2")
    assert route(m1, "e", "s1").kind == "new"
    session = _session(m1, "s1")
    assert route(m1, "e", "s1") == route(m1, "e", "s1") and route(m1, "e", "s1").kind == "resume"
    assert route(m1, "e", "s1").session == session
    where = route(m2, "e", "s1")
    assert (where.kind, where.machine) == ("elsewhere", "m1")
    _finish(m1, session)
    assert (route(m1, "e", "s1").kind, route(m1, "e", "s1").session) == ("done", session)
    assert route(m1, "e", "s2").kind == "new"  # a second submission adds a session on the same machine
    with pytest.raises(UsageError) as info:
        route(m2, "e", "s2")  # finished on m1: never pooled with m2's runs
    assert "was run on machine m1" in str(info.value) and "another experiment name" in str(info.value)


def test_a_job_belonging_elsewhere_moves_to_that_machines_queue_first_in_line():
    job = SimpleNamespace(queue="perfab/vm")
    retry = Moves().get_retry_exception(BelongsElsewhere("m7"), job)
    assert (retry.retry_decision.queue, retry.retry_decision.priority) == ("perfab/vm/m7", 10)
    assert Moves().get_retry_exception(RuntimeError("boom"), job) is None  # failures are not retried
    assert Moves().get_retry_exception(BelongsElsewhere("m7"), SimpleNamespace(queue="default")) is None


def test_queue_names():
    assert machine_queue("skl-2s", "lkp-01.lab") == "perfab/skl-2s/lkp-01.lab"
    assert [class_of(q) for q in ("perfab/a", "perfab/a/m", "default", "perfab")] == ["a", "a", None, None]
    for bad in ("", "a/b", "-x", "x y", "é"):
        with pytest.raises(UsageError):
            check_name("machine", bad)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv, says", [
    (["submit", "x.toml", "--db", "r.db", "--machines", "vm"], "shares one PostgreSQL database"),
    (["worker", "--db", "r.db", "--machine-class", "vm"], "shares one PostgreSQL database"),
    (["submit", "x.toml", "--db", "postgresql://u@/d?host=/nowhere", "--machines", "a/b"], "machine class 'a/b'"),
    (["worker", "--db", "postgresql://u@/d?host=/nowhere", "--machine-class", "vm", "--machine", "m 1"],
     "machine 'm 1'"),
    (["submit", "x.toml", "--db", "postgresql://u@/d?host=/nowhere"], "--machines"),
])
def test_fleet_usage_errors_are_one_line(argv, says):
    code, _, err = _cli(*argv)
    assert code == 2 and says in err and len(err.splitlines()) == 1


def test_a_bad_spec_queues_nothing_and_names_itself(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[experiment]\nname = \n")
    code, out, err = _cli("submit", str(bad), "--db", f"postgresql://u@/d?host={tmp_path}", "--machines", "vm")
    assert code == 2 and "bad.toml" in err and out == "" and len(err.splitlines()) == 1
