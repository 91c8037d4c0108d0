"""A session stores its design (runs, order, the sequential design), so resuming it reads no spec text; a
session stored before the design column (schema 3) is still recognised as sequential from its text."""

from __future__ import annotations

import sqlite3

from core_helpers import fake_runner
from perfab.specfile import parse_spec
from perfab.specfile.stored import definitions
from perfab.store import Store

SEQUENTIAL = """
[experiment]
name = "e"
runs = "auto"
min_runs = 4
max_runs = 8

[[variant]]
name = "a"
[[variant]]
name = "b"

[[workload]]
name = "w"
argv = ["w"]
"""
FIXED = SEQUENTIAL.replace('runs = "auto"\nmin_runs = 4\nmax_runs = 8', "runs = 3")


def _stopped_without_runs_left(db, text: str, design: dict | None) -> int:
    """An interrupted session of experiment "e" whose stored plan has no run left (its next block unplanned)."""
    with Store(db) as store:
        session = store.start_session("e", text, "e.toml", "h", None, "time", ((),), {}, [], None, design)
        store.finish_session(session, "interrupted")
    return session


def _unfinished(db) -> int | None:
    with Store(db) as store:
        found = store.unfinished_session("e")
    return None if found is None else found.id


def test_the_design_a_session_stores_is_the_experiments(tmp_path):
    """The runner stores Experiment.design with the session; it reads back unchanged."""
    db = tmp_path / "r.db"
    runner, _, store = fake_runner(SEQUENTIAL, db)
    runner.run()
    (session,) = store.sessions("e")
    store.close()
    exp = parse_spec(SEQUENTIAL)
    assert {k: v for k, v in session.design.items() if k != "replication"} == exp.design
    assert session.design["replication"]["unit"] == "run"  # and how its runs relate to draws (perfab.replication)
    assert session.design["sequential"] == {"min_runs": 4, "max_runs": 8, "stop_on": "primary",
                                            "spending": "pocock"}
    assert session.sequential and session.design["runs"] == 8


def test_resume_asks_the_stored_design_not_the_spec_text(tmp_path):
    """A sequential design makes a session with no run left resumable whatever its text says, and a fixed
    design does not, even under a text saying runs = "auto"."""
    db = tmp_path / "r.db"
    session = _stopped_without_runs_left(db, "not toml [", parse_spec(SEQUENTIAL).design)
    assert _unfinished(db) == session
    db2 = tmp_path / "r2.db"
    _stopped_without_runs_left(db2, SEQUENTIAL, parse_spec(FIXED).design)
    assert _unfinished(db2) is None


def test_a_session_stored_before_the_design_column_is_read_from_its_text(tmp_path):
    """design_json NULL (a session migrated from schema 3): sequential or not is read from the stored text."""
    db = tmp_path / "r.db"
    session = _stopped_without_runs_left(db, SEQUENTIAL, None)
    con = sqlite3.connect(db)
    assert con.execute("SELECT design_json FROM sessions").fetchone() == (None,)
    con.close()
    assert _unfinished(db) == session
    db2 = tmp_path / "r2.db"
    _stopped_without_runs_left(db2, FIXED, None)
    assert _unfinished(db2) is None


def test_workload_definitions_agree_between_stored_designs_and_older_sessions_texts(tmp_path):
    """A session with a design and one stored before it (same spec) give the analysis the same workload
    definitions, so a store holding both warns of no change; a changed parser is a changed definition."""
    db = tmp_path / "r.db"
    _stopped_without_runs_left(db, SEQUENTIAL, parse_spec(SEQUENTIAL).design)
    _stopped_without_runs_left(db, SEQUENTIAL, None)
    changed = SEQUENTIAL.replace('argv = ["w"]', 'argv = ["w"]\nparser = "keyvalue"')
    _stopped_without_runs_left(db, changed, parse_spec(changed).design)
    with Store(db) as store:
        new, old, fixed = (definitions(s) for s in store.sessions("e"))
    assert new == old and new["w"]["parser"] == "none {}"
    assert fixed["w"]["parser"] == "keyvalue {}" and fixed["w"]["definition"] != new["w"]["definition"]
    assert definitions(type("Unreadable", (), {"design": None, "spec_text": "not toml ["})()) is None
