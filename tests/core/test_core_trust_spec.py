"""Everything checkable is checked before a session is stored: one line, exit 2, nothing written."""

from __future__ import annotations

import sqlite3
import sys

import pytest

from core_helpers import cli, two_sides

BAD = {
    "huge runs": (two_sides().replace("runs = 4", "runs = 9223372036854775807"),
                  ["experiment.runs", "must be <= 10,000"]),
    "huge warmup": (two_sides().replace("warmup = 1", "warmup = 100000000"), ["experiment.warmup", "<= 1,000"]),
    "float warmup": (two_sides().replace("warmup = 1", "warmup = 1e8"), ["experiment.warmup", "expected integer"]),
    "plan too big": (two_sides(workload='argv = ["true"]\nparams = {n = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,'
                                        '17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,'
                                        '41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60]}')
                     .replace("runs = 4", "runs = 2000"), ["experiment.runs", "the plan would hold"]),
    "nul in argv": (two_sides(workload='argv = ["echo", "a\\u0000b"]'), ["workload[0].argv[1]", "NUL"]),
    "nul in env": (two_sides(variants='[[variant]]\nname = "a"\nenv = {X = "a\\u0000"}\n[[variant]]\nname = "b"\n'),
                   ["variant[0].env.X", "NUL"]),
    "= in env name": (two_sides(variants='[[variant]]\nname = "a"\nenv = {"A=B" = "1"}\n[[variant]]\nname = "b"\n'),
                      ["variant[0].env", "'A=B'", "without '='"]),
    "empty env name": (two_sides(variants='[[variant]]\nname = "a"\nenv = {"" = "1"}\n[[variant]]\nname = "b"\n'),
                       ["variant[0].env", "non-empty"]),
    "backwards pin": (two_sides('pin = "5-1"'), ["experiment.pin", "runs backwards", '"1-5"']),
    "pin out of range": (two_sides('pin = "99999"'), ["experiment.pin", "out of range"]),
    "unknown parser": (two_sides(workload='argv = ["true"]\nparser = "abx"'), ["workload[0].parser", "unknown parser"]),
    "bad parser option": (two_sides(workload='argv = ["true"]\nparser = "ab"\nparser_options = {x = 1}'),
                          ["workload[0].parser_options", "no option 'x'"]),
    "options without parser": (two_sides(workload='argv = ["true"]\nparser_options = {x = 1}'),
                               ["workload[0].parser_options", "without a parser"]),
    "side placeholder in workload setup": (two_sides(workload='argv = ["true"]\nsetup = ["make {variant}"]'),
                                           ["workload[0].setup", "{variant}", "variant.setup"]),
    "cachegrind key for time": (two_sides() + '\n[measure]\nl1i = "32K,8,64"\n',
                                ["measure.l1i", "cachegrind backend"]),
    "bad sweep": (two_sides(workload='argv = ["true"]\nparams = {threads = []}'),
                  ["workload[0].params.threads", "non-empty"]),
    "reserved sweep name": (two_sides(workload='argv = ["true"]\nparams = {variant = [1]}'),
                            ["workload[0].params.variant", "not a usable parameter name"]),
    "repeated sweep value": (two_sides(workload='argv = ["true"]\nparams = {n = [1, "1"]}'),
                             ["workload[0].params.n", "repeat"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_spec_is_refused_by_plan_and_run_storing_nothing(tmp_path, case):
    text, needles = BAD[case]
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    db = tmp_path / "r.db"
    for argv in (["plan", str(spec)], ["run", str(spec), "--db", str(db)]):
        code, out, err = cli(*argv)
        assert code == 2 and out == "" and "Traceback" not in err, (argv, err)
        assert len(err.splitlines()) == 1, err
        for needle in needles:
            assert needle in err, (needle, err)
    assert not db.exists() or sqlite3.connect(db).execute("SELECT count(*) FROM sqlite_master").fetchone()[0] in (0,)


PROGRAMS = {
    "missing program": ('argv = ["./no-such-binary"]', "argv[0] './no-such-binary' does not exist"),
    "directory": ('argv = ["/tmp"]', "argv[0] '/tmp' is a directory"),
    "not executable": ('argv = ["{here}/data.txt"]', "data.txt' is not executable"),
    "not on PATH": ('argv = ["no-such-tool-xyz"]', "argv[0] 'no-such-tool-xyz' is not on the PATH"),
    "missing cwd": ('argv = ["true"]\ncwd = "/no/such/dir"', "cwd '/no/such/dir' is not a directory"),
    "unknown placeholder": ('argv = ["echo", "{nope}"]', "unknown placeholder {nope}"),
    "service program": ('argv = ["true"]\n[workload.service]\nargv = ["./no-server"]\nport = 9',
                        "service argv[0] './no-server' does not exist"),
}


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_commands_are_checked_by_plan_and_before_a_session_is_stored(tmp_path, case):
    workload, needle = PROGRAMS[case]
    (tmp_path / "data.txt").write_text("not a program\n")
    (tmp_path / "data.txt").chmod(0o644)
    workload = workload.replace("{here}", str(tmp_path))
    spec = tmp_path / "s.toml"
    spec.write_text(two_sides(workload=workload))
    db = tmp_path / "r.db"
    for argv in (["plan", str(spec)], ["run", str(spec), "--db", str(db)]):
        code, out, err = cli(*argv)
        assert code == 2 and len(err.splitlines()) == 1 and needle in err, (argv, err)
    code, out, _ = cli("list", "--db", str(db))
    assert code == 0 and out == ""  # no session: the next run is not blocked


def _wait_for_a_stored_run(db, deadline: float) -> None:
    """Until ``db`` holds a run: the runner is past its start-up and handles SIGINT."""
    import sqlite3
    import time

    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                if con.execute("SELECT count(*) FROM runs").fetchone()[0]:
                    return
        except sqlite3.Error:
            pass  # not created yet
        time.sleep(0.1)
    raise AssertionError(f"no run stored in {db} within a minute")


def test_the_resume_hint_repeats_the_database(tmp_path):
    import os
    import signal
    import subprocess
    import time

    spec = tmp_path / "s.toml"
    spec.write_text(two_sides(runs=50, warmup=0, workload='argv = ["sleep", "0.2"]'))
    db = tmp_path / "custom.db"
    proc = subprocess.Popen([sys.executable, "-m", "perfab.cli", "run", str(spec), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_a_stored_run(db, time.monotonic() + 60)  # a fixed sleep lost the race on a loaded machine
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert f"--resume --db {db}" in err.decode(), err
    assert os.path.exists(db)


def test_a_sweep_interleaves_its_points_and_shows_them_in_plan(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(two_sides(runs=2, warmup=0, workload='argv = ["echo", "{threads}"]\nparams = {threads = [1, 2]}'))
    code, out, err = cli("plan", str(spec))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 8 and {line.split()[-1] for line in lines} == {"threads=1", "threads=2"}
    assert [line.split()[-1] for line in lines[:4]] != ["threads=1"] * 4  # points interleave
