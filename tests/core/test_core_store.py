"""The SQLite store: schema versioning, refusing unusable files untouched, the notebook API."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

import perfab
from core_helpers import cli, fake_runner, two_sides
from perfab.errors import StoreError, UsageError
from perfab.store import SCHEMA_VERSION, Store
from perfab.store.schema import MIGRATIONS


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_schema_version_and_migrations_table(db):
    Store(db).close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    rows = con.execute("SELECT version FROM migrations").fetchall()
    assert rows == [(1,), (2,), (3,), (4,), (5,), (6,)]
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"experiments", "sessions", "planned_runs", "runs", "samples", "exclusions", "metric_meta",
            "profile_shares"} <= tables
    con.close()
    Store(db).close()  # reopening applies nothing twice
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM migrations").fetchone()[0] == 6
    con.close()


def _v4_database(path) -> None:
    """A results file as schema 4 left it: two runs with samples, an exclusion and profile shares."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
                "applied_at REAL NOT NULL)")
    for number, description, sql in MIGRATIONS[:4]:
        con.executescript(sql)
        con.execute("INSERT INTO migrations VALUES (?, ?, 0)", (number, description))
    con.execute("PRAGMA user_version = 4")
    con.execute("INSERT INTO experiments VALUES (1, 'old', 0)")
    con.execute("INSERT INTO sessions (id, experiment_id, started_at, status, spec_text, spec_hash, backend, "
                "groups_json, environment_json) VALUES (1, 1, 0, 'finished', '', 'h', 'time', '[[]]', '{}')")
    for run in (1, 2):
        con.execute("INSERT INTO planned_runs (id, session_id, seq, workload, variant, grp, warmup, block) "
                    "VALUES (?, 1, ?, 'w', 'a', 0, 0, 0)", (run, run))
        con.execute("INSERT INTO runs (id, planned_id, started_at, status) VALUES (?, ?, 0, 'ok')", (run, run))
    con.executemany("INSERT INTO samples VALUES (?, ?, ?, ?)", V4_SAMPLES)
    con.execute("INSERT INTO exclusions VALUES (2, 'max_rss_kb', 'not measurable')")
    con.executemany("INSERT INTO profile_shares VALUES (?, ?, ?)", [(1, "self.main", 61.5), (1, "self.λ", 38.5)])
    con.commit()
    con.close()


V4_SAMPLES = [(2, "wall_s", 0.1 + 0.2, "rusage"), (1, "wall_s", 1e-300, "rusage"), (1, "ops", -1 / 3, "parser"),
              (2, "ops", 1.7976931348623157e308, "parser")]


def test_schema_5_keeps_every_value_and_stores_values_in_key_order(tmp_path):
    path = tmp_path / "v4.db"
    _v4_database(path)
    Store(path).close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT run_id, metric, value, source FROM samples").fetchall() == sorted(V4_SAMPLES)
    assert con.execute("SELECT * FROM exclusions").fetchall() == [(2, "max_rss_kb", "not measurable")]
    assert con.execute("SELECT * FROM profile_shares").fetchall() == [(1, "self.main", 61.5), (1, "self.λ", 38.5)]
    sql = dict(con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    assert all(sql[t].endswith("WITHOUT ROWID") for t in ("samples", "exclusions", "profile_shares"))
    indexes = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "runs_by_planned" not in indexes and "sqlite_autoindex_samples_1" not in indexes
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    con.close()


def _newer(db):
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE future (x)")
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()


def test_newer_database_refused_and_not_modified(db):
    _newer(db)
    before = _digest(db)
    with pytest.raises(StoreError) as info:
        Store(db)
    message = str(info.value)
    assert "newer perfab" in message and f"schema {SCHEMA_VERSION + 1}" in message and "\n" not in message
    assert _digest(db) == before


def test_newer_database_through_the_cli(db):
    _newer(db)
    before = _digest(db)
    code, out, err = cli("report", "--db", str(db))
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1 and "newer perfab" in err and "upgrade perfab" in err
    assert _digest(db) == before


def test_non_database_file(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("this is not sqlite\n" * 100)
    before = _digest(junk)
    code, out, err = cli("report", "--db", str(junk))
    assert code == 1 and len(err.splitlines()) == 1
    assert "not a usable perfab database" in err and "--db" in err and "Traceback" not in err
    assert _digest(junk) == before


def test_missing_database_for_report(tmp_path):
    code, _, err = cli("report", "--db", str(tmp_path / "none.db"))
    assert code == 2 and "no results database here" in err
    assert not (tmp_path / "none.db").exists()


def test_report_for_unknown_experiment_names_the_known_ones(db):
    for name in ("alpha", "beta"):
        runner, _, store = fake_runner(two_sides(runs=2, warmup=0, name=name), db)
        runner.run()
        store.close()
    code, out, err = cli("report", "gamma", "--db", str(db))
    assert code == 2 and out == ""
    assert err.strip() == f"perfab: {db}: no experiment named 'gamma'; known: alpha, beta"


def test_load_returns_runs_and_samples(db):
    runner, ex, store = fake_runner(two_sides(runs=3, warmup=1), db)
    runner.run()
    store.close()
    results = perfab.load(str(db))
    assert results.experiment == "t"
    assert len(results.runs) == 8
    assert sum(r["warmup"] for r in results.runs) == 2
    walls = [s for s in results.samples if s["metric"] == "wall_s"]
    assert len(walls) == 8 and {s["value"] for s in walls} == {0.01}
    assert {s["variant"] for s in walls} == {"a", "b"}
    assert {"user_s", "sys_s", "max_rss_kb", "vcsw", "ivcsw"} <= {s["metric"] for s in results.samples}
    with pytest.raises(UsageError):
        perfab.load(str(db), "nope")


def test_to_pandas(db):
    runner, _, store = fake_runner(two_sides(runs=2, warmup=0), db)
    runner.run()
    store.close()
    results = perfab.load(str(db))
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(UsageError) as info:
            results.to_pandas()
        assert "pip install pandas" in str(info.value)
    else:
        df = results.to_pandas()
        assert len(df) == len(results.samples) and "metric" in df.columns


def test_record_run_of_a_stored_run_adds_an_attempt_and_keeps_the_first(db):
    """A re-run of a planned run once replaced the stored one; now the first stays and the newest counts."""
    runner, _, store = fake_runner(two_sides(runs=2, warmup=0), db)
    result = runner.run()
    run = store.run_rows("t")[0]
    before = len(store.samples("t"))
    from perfab.plan import PlannedRun
    from perfab.store import RunRecord

    planned = PlannedRun(run["seq"], run["workload"], run["variant"], 0, False, run["block"])
    rec = RunRecord("ok", None, 0.0, 2.0, 2.0, 0.0, 1, 0, 0, 0, None, False, b"", b"", 0, 0, {"wall_s": 2.0})
    store.claim(result.session)
    store.record_run(result.session, planned, rec)
    assert len(store.run_rows("t")) == 4  # counted: the newest attempt of each planned run
    assert len(store.run_rows("t", all_attempts=True)) == 5
    assert len(store.samples("t")) == before + 1  # nothing deleted
    data = store.load("t")
    newest = next(r for r in data.runs if r.seq == run["seq"])
    assert newest.attempt == 2 and data.values[newest.run_id] == {"wall_s": 2.0}
    store.close()
