"""``perfab plan --try`` and ``perfab parse``: a parser checked before a session is spent on it.

Regression: a regex that failed at one sweep point only cost 23 failed runs before the abort.  The trial
runs each workload once per side and point, for real (sh printing the figures), and stores nothing.
"""

from __future__ import annotations

import re

from core_helpers import REPO, cli

# n = 1 prints "1000.5", which the integer-only pattern cannot read; n = 3 and 10 print whole numbers.
SWEEP = r'''
[experiment]
name = "try-sweep"
runs = 10

[[variant]]
name = "a"

[[variant]]
name = "b"

[[workload]]
name = "count"
shell = true
argv = "n={n}; if [ $n -gt 2 ]; then echo \"rate: $((n*1000)) items/s\"; else echo \"rate: $((n*1000)).5 items/s\"; fi"
parser = "regex"
parser_options = { patterns = { rate = 'rate: (\d+) items/s' }, units = { rate = "items/s" } }
params = { n = [1, 3, 10] }
'''


def test_a_parser_failing_at_one_sweep_point_shows_there_and_nothing_is_stored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SWEEP)
    code, out, err = cli("plan", "spec.toml", "--try")
    assert code == 1
    assert "2 of 6 trial runs failed" in err and "fix the workload or its parser" in err
    assert out.startswith("TRY: one run per side and sweep point, not stored (4 ok, 2 failed)")
    for side in ("a", "b"):
        assert re.search(rf"FAILED  count on {side} at n=1: output not parsed: regex for metric 'rate' matched "
                         "nothing", out)
        for n in (3, 10):
            block = out.split(f"ok      count on {side} at n={n}\n")[1]
            assert block.splitlines()[0].split() == ["rate", f"{n * 1000:,}", "items/s", "(parser)"]
    assert "stdout ends | rate: 1000.5 items/s" in out  # what the pattern missed, to fix it by
    assert not (tmp_path / ".perfab").exists()  # no results database was written


def test_a_trial_that_reads_everything_exits_0_and_all_lists_perfabs_own_readings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SWEEP.replace(r"(\d+)", r"([\d.]+)"))
    code, out, err = cli("plan", "spec.toml", "--try")
    assert code == 0, err
    assert "(6 ok, 0 failed)" in out and "FAILED" not in out
    assert "1,000.5 items/s" in out or "1,000.50 items/s" in out
    assert "reading(s) perfab takes itself" in out and "user_s" not in out
    code, out, _ = cli("plan", "spec.toml", "--try", "--all")
    assert code == 0 and "user_s" in out and "(rusage)" in out


def test_parse_reads_a_saved_output_with_the_specs_parser():
    """The demo's recorded lockbench output (tests/data/keyvalue/NOTE.md) through examples/default.toml."""
    saved = REPO / "tests" / "data" / "keyvalue" / "lockbench_inline_256sites.txt"
    code, out, err = cli("parse", str(REPO / "examples" / "default.toml"), str(saved))
    assert code == 0, err
    printed = dict(line.split(": ") for line in saved.read_text().splitlines())
    got = {line.split()[0]: line.split()[1] for line in out.splitlines()}
    assert set(got) == set(printed)
    assert got["ops/s"] == f"{int(printed['ops/s']):,}"


def test_parse_says_what_the_parser_missed(tmp_path):
    (tmp_path / "spec.toml").write_text(SWEEP)
    (tmp_path / "out.txt").write_text("rate: 1000.5 items/s\n")
    code, out, err = cli("parse", str(tmp_path / "spec.toml"), str(tmp_path / "out.txt"))
    assert code != 0 and out == ""
    assert err.startswith("perfab: regex for metric 'rate' matched nothing") and len(err.splitlines()) == 1


def test_parse_of_a_missing_file_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "spec.toml").write_text(SWEEP)
    code, _, err = cli("parse", str(tmp_path / "spec.toml"), str(tmp_path / "nope.txt"))
    assert code == 2 and err.startswith("perfab: cannot read ") and len(err.splitlines()) == 1


def test_a_sweep_point_no_run_of_which_parses_aborts_after_three(tmp_path, monkeypatch):
    """Regression: 23 runs failed before the general failure limit stopped the session."""
    import sqlite3

    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SWEEP)
    code, out, err = cli("run", "spec.toml", "--db", "r.db")
    assert code == 1 and out == ""
    message = err.strip().splitlines()[-1]
    assert message.startswith("perfab: aborted: the first 3 runs of workload 'count' at n=1 all failed to parse")
    assert "perfab plan spec.toml --try" in message and "continue with --resume" in message
    db = sqlite3.connect(tmp_path / "r.db")
    failed = db.execute("SELECT count(*) FROM runs WHERE status = 'failed'").fetchone()[0]
    parsed = db.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0]
    assert failed == 3  # the general limit would have allowed 15 (a quarter of 60 runs)
    assert parsed > 0  # the other points' runs before the abort are kept
    assert db.execute("SELECT status FROM sessions").fetchone()[0] == "aborted"


def test_sessions_read_by_different_parsers_are_pooled_only_with_a_warning_naming_them(tmp_path, monkeypatch):
    """Regression: after a parser fix, --new-session pooled the first session's runs (only those that parsed)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SWEEP)
    assert cli("run", "spec.toml", "--db", "r.db")[0] == 1  # aborted at n=1
    (tmp_path / "spec.toml").write_text(SWEEP.replace(r"(\d+)", r"([\d.]+)"))
    code, out, err = cli("run", "spec.toml", "--db", "r.db", "--new-session", "--format", "json")
    assert code == 0, err
    import json

    warnings = json.loads(out)["warnings"]
    (changed,) = [w for w in warnings if w["kind"] == "parser_changed"]
    assert changed["data"]["workload"] == "count" and len(changed["data"]["parsers"]) == 2
    warning = changed["text"]
    assert warning.startswith("count: sessions read their outputs with different parsers (regex ")
    assert r'"rate: (\\d+) items/s"' in warning and r'"rate: ([\\d.]+) items/s"' in warning
    assert "biased subset" in warning


def test_a_parser_only_fix_reads_the_stored_outputs_again_on_resume(tmp_path, monkeypatch):
    """Regression: --resume refused the fixed spec, and --new-session pooled only the runs that had parsed."""
    import json
    import sqlite3

    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SWEEP)
    assert cli("run", "spec.toml", "--db", "r.db")[0] == 1  # aborted at n=1
    db = sqlite3.connect(tmp_path / "r.db")
    stored = db.execute("SELECT count(*) FROM runs").fetchone()[0]
    unparsed = db.execute("SELECT count(*) FROM runs WHERE reason LIKE 'output not parsed%'").fetchone()[0]
    (tmp_path / "spec.toml").write_text(SWEEP.replace(r"(\d+)", r"([\d.]+)"))
    code, out, err = cli("run", "spec.toml", "--db", "r.db", "--resume", "--format", "json", "--all")
    assert code == 0, err
    assert f"the parser changed: {stored} stored run(s) read again, 0 still unreadable, 0 kept" in err
    again = db.execute("SELECT count(*) FROM runs WHERE attempt = 2").fetchone()[0]
    assert again == stored and unparsed == 3  # every stored output read again, none of them run again
    report = json.loads(out)
    rate = {(r["params"]["n"], r["variant"]): r for r in report["rows"] if r["metric"] == "rate"}
    assert rate[("1", "b")]["median_base"] == 1000.5 and rate[("1", "b")]["n_base"] == 10
    assert not [w for w in report["warnings"] if w["kind"] in ("parser_changed", "workloads_changed")]
    assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1


def test_resume_still_refuses_a_change_beyond_the_parser(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SWEEP)
    assert cli("run", "spec.toml", "--db", "r.db")[0] == 1
    (tmp_path / "spec.toml").write_text(SWEEP.replace("runs = 10", "runs = 12"))
    code, _, err = cli("run", "spec.toml", "--db", "r.db", "--resume")
    assert code == 2 and "changed since session 1 began, beyond its parsers" in err


def test_an_explicit_failure_limit_is_the_users_and_runs_the_session_out(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SWEEP.replace("runs = 10", "runs = 4\nmax_failures = 100"))
    code, _, err = cli("run", "spec.toml", "--db", "r.db")
    assert "aborted" not in err and code == 0, err
    db = sqlite3.connect(tmp_path / "r.db")
    assert db.execute("SELECT count(*) FROM runs WHERE status = 'failed'").fetchone()[0] == 2 * (4 + 1)
