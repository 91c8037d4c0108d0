"""Hostile workloads, run for real: each failure is stored with its reason and never reaches a verdict.

Every case runs ``perfab run`` on tiny shell workloads (two runs per side)
and checks what was stored (status and reason of every attempt), what
``run`` exits with, and that no traceback and no ``**`` come of failed data.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from reliability_helpers import cli, runs_of, script, two_sides, write


def run(tmp_path: Path, workload: str, experiment: str = "max_failures = 20", **kw):
    spec = write(tmp_path / "w.toml", two_sides(workload=workload, experiment=experiment, **kw))
    db = tmp_path / "r.db"
    return cli("run", spec, "--db", db), db


def measured(db: Path) -> list[tuple]:
    return [r for r in runs_of(db) if not r[2]]


@pytest.mark.parametrize("body, reason", [
    ("exit 3", r"^exit status 3$"),
    ("echo 'disk quota exceeded' >&2; exit 1", r"^exit status 1: disk quota exceeded$"),
    ("kill -SEGV $$", r"^killed by SIGSEGV$"),
    ("kill -KILL $$", r"^killed by SIGKILL$"),
    ("kill -ABRT $$", r"^killed by SIGABRT$"),
], ids=["exit-3", "exit-1-with-stderr", "segfault", "sigkill", "abort"])
def test_every_run_fails_the_same_way(tmp_path, body, reason):
    """A workload that always fails: every attempt failed with that reason, exit 1, 'No comparison'."""
    script(tmp_path / "job", body)
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]')
    stored = measured(db)
    assert stored and all(s == "failed" and re.search(reason, why) for *_, s, why in stored), stored
    assert out.code == 1 and "Traceback" not in out.err
    assert "No comparison" in out.out and "**" not in out.out


def test_only_side_b_fails(tmp_path):
    """Side b's build is broken (exit 2), side a is fine: a's runs are ok, b's failed, no verdict, exit 1."""
    script(tmp_path / "a", "true")
    script(tmp_path / "b", "exit 2")
    out, db = run(tmp_path, f'argv = ["{tmp_path}/{{variant}}"]')
    by_side = {v: {s for _, vv, w, s, _ in measured(db) if vv == v} for v in "ab"}
    assert by_side == {"a": {"ok"}, "b": {"failed"}}
    assert out.code == 1 and "Failed runs on b: 2 (2x exit status 2)" in out.out


def test_too_many_failures_abort_the_session(tmp_path):
    """More failures than max_failures: the session stops early with one line naming the limit."""
    script(tmp_path / "job", "exit 1")
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]', experiment="max_failures = 1", runs=6)
    assert out.code != 0 and "Traceback" not in out.err
    assert "max_failures" in out.err or "failed" in out.err.splitlines()[-1]
    assert 2 <= len(measured(db)) < 12


def test_timeout_kills_the_run_and_says_so(tmp_path):
    """A run past its timeout is killed and stored failed 'timed out after 0.5 s', within a few seconds."""
    start = time.monotonic()
    out, db = run(tmp_path, 'argv = ["sleep", "30"]\ntimeout = 0.5', runs=1)
    assert time.monotonic() - start < 20
    assert {why for *_, s, why in measured(db)} == {"timed out after 0.5 s"}
    assert out.code == 1


def test_timeout_with_a_child_that_ignores_sigterm(tmp_path):
    """The workload's child traps TERM and sleeps: still killed at the timeout; nothing of it survives."""
    pidfile = tmp_path / "child.pid"
    script(tmp_path / "job", f"sh -c 'trap \"\" TERM; echo $$ > {pidfile}; exec sleep 30' &\nwait\n")
    start = time.monotonic()
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]\ntimeout = 0.5', runs=1)
    assert time.monotonic() - start < 25
    assert all(why == "timed out after 0.5 s" for *_, why in measured(db))
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_escaped_daemon_does_not_outlive_its_run(tmp_path):
    """A workload leaves `setsid sleep` behind holding stdout: the run ends, the daemon is killed, the next runs
    are ok."""
    pidfile = tmp_path / "daemon.pid"
    script(tmp_path / "job", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' &\nsleep 0.05\n")
    start = time.monotonic()
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]\ntimeout = 5')
    assert time.monotonic() - start < 40
    assert out.code == 0, out.err
    assert all(s == "ok" for *_, s, _ in measured(db))
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


def test_a_workload_reading_stdin_does_not_hang(tmp_path):
    """`cat` with no file: stdin is not the terminal or a pipe left open, so it ends at once."""
    start = time.monotonic()
    out, db = run(tmp_path, 'argv = ["cat"]\ntimeout = 10')
    assert time.monotonic() - start < 30
    assert out.code == 0 and all(s == "ok" for *_, s, _ in measured(db))


def test_escape_sequences_on_stderr_are_neutralised_in_the_terminal(tmp_path):
    """A failing workload prints an ANSI escape (clear screen, red) on stderr: no ESC byte reaches the user."""
    script(tmp_path / "job", r"printf '\033[2J\033[31mboom\033[0m\n' >&2; exit 4")
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]')
    assert "\x1b" not in out.out and "\x1b" not in out.err
    assert "boom" in out.out and "exit status 4" in out.out


def test_invalid_utf8_on_stderr_is_stored_and_shown_safely(tmp_path):
    """Bytes that are not UTF-8 in the failure message: stored and printed with replacement, no traceback."""
    script(tmp_path / "job", r"printf 'bad \377\376 bytes\n' >&2; exit 5")
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]')
    reasons = {why for *_, why in measured(db)}
    assert len(reasons) == 1 and next(iter(reasons)).startswith("exit status 5: bad ")
    assert "Traceback" not in out.err and out.code == 1


def test_output_beyond_the_cap_is_not_parsed_in_part(tmp_path):
    """8 MB of output with the figure at the end: never parsed from the kept head; failed, naming stdout_cap."""
    script(tmp_path / "job", "echo 'ops: 1'; head -c 8000000 /dev/zero | tr '\\0' 'x'; echo; echo 'ops: 42'")
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]\nparser = "keyvalue"\nparser_options = {{only = ["ops"]}}')
    assert all(s == "failed" and "cut at experiment.stdout_cap (65,536 of 8,000,0" in why and "raise stdout_cap" in why
               for *_, s, why in measured(db)), measured(db)
    assert out.code == 1 and db.stat().st_size < 4_000_000


def test_output_beyond_the_cap_parses_once_the_cap_is_raised(tmp_path):
    """The same workload with stdout_cap above its output: every run ok, the final figure read."""
    script(tmp_path / "job", "echo 'ops: 1'; head -c 200000 /dev/zero | tr '\\0' 'x'; echo; echo 'ops: 42'")
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]\nparser = "keyvalue"\nparser_options = {{only = ["ops"]}}',
                  experiment="stdout_cap = 400000")
    assert out.code == 0, out.err
    assert all(s == "ok" for *_, s, _ in measured(db))


@pytest.mark.parametrize("printed, parser, why", [
    ("nothing useful", "hackbench", r"output not parsed: hackbench output has no 'Time: <seconds>' line"),
    ("Time: inf", "hackbench", r"output not parsed: hackbench output has no 'Time: <seconds>' line"),
    ("Time: 1e400", "hackbench", r"output not parsed: hackbench metric 'time_s' reads '1e400', which is not a finite"),
], ids=["no-line", "inf", "1e400"])
def test_parser_refusal_is_the_stored_reason(tmp_path, printed, parser, why):
    """Output its parser refuses: each run failed with 'output not parsed: <the parser's line>'."""
    out, db = run(tmp_path, f'argv = ["echo", "{printed}"]\nparser = "{parser}"')
    assert all(s == "failed" and re.search(why, r) for *_, s, r in measured(db)), measured(db)
    assert out.code == 1 and "**" not in out.out


def test_self_prefixed_metric_from_a_workload_is_kept_as_a_row(tmp_path):
    """A workload's own metric named self.calls (a name profile data uses) stays a row of the table."""
    out, db = run(tmp_path, 'argv = ["echo", "self.calls: 7"]\nparser = "keyvalue"\n'
                            'parser_options = {higher_is_better = {"self.calls" = true}}')
    assert out.code == 0, out.err
    assert any(line.startswith("self.calls") for line in out.out.splitlines()), out.out


def test_environment_of_the_side_reaches_the_workload(tmp_path):
    """variant.env is in the run's environment and differs per side (a side cannot silently get the other's)."""
    variants = '[[variant]]\nname = "a"\nenv = {LEVEL = "1"}\n\n[[variant]]\nname = "b"\nenv = {LEVEL = "5"}\n'
    script(tmp_path / "job", 'echo "level: $LEVEL"')
    out, db = run(tmp_path, f'argv = ["{tmp_path}/job"]\nparser = "keyvalue"\n'
                            'parser_options = {higher_is_better = {level = true}}', variants=variants)
    row = next(line for line in out.out.splitlines() if line.startswith("level"))
    assert row.split()[1:3] == ["1", "5"], row
