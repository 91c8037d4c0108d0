"""The runner over FakeExecutor: storage of every run, expansion, side switching, failures, SIGINT, resume."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from core_helpers import FakeOutcome, fake_runner, runs_table, two_sides
from perfab.analyse.compare import analyse
from perfab.analyse.diagnostics import Kind
from perfab.errors import PerfabError, UsageError
from perfab.plan import make_plan
from perfab.report import render
from perfab.run.backends import SameForEverySide
from perfab.specfile import parse_spec
from perfab.specfile.backends import TIME


def _counting(outcomes: dict[int, FakeOutcome], default: FakeOutcome = FakeOutcome(wall_s=1.0), hook=None):
    """A behaviour answering the n-th call (from 1) with ``outcomes[n]``, else ``default``."""
    calls = [0]

    def behaviour(argv, env):
        calls[0] += 1
        if hook:
            hook(calls[0])
        return outcomes.get(calls[0], default)

    return behaviour


def test_every_planned_run_stored_and_warmups_not_analysed(db):
    text = two_sides(runs=6, warmup=2)
    # The first four calls are the warm-ups (2 per side): give them an absurd time.
    runner, ex, store = fake_runner(text, db, _counting({n: FakeOutcome(wall_s=99.0) for n in range(1, 5)}))
    result = runner.run()
    assert result.status == "finished" and result.runs_done == 16 and result.runs_failed == 0
    rows = runs_table(db)
    assert len(rows) == len(make_plan(runner.exp)) == 16
    assert [r[0] for r in rows] == list(range(16))
    assert [bool(r[2]) for r in rows] == [True] * 4 + [False] * 12
    analysis = analyse(store, "t")
    assert analysis.runs_per_side == {"a": 6, "b": 6}
    wall = next(r for r in analysis.rows if r.metric == "wall_s")
    assert wall.base_values == (1.0,) * 6 and wall.exp_values == (1.0,) * 6
    store.close()


VARS = ('[[variant]]\nname = "a"\nvars = {bin = "/opt/A"}\nenv = {MODE = "slow"}\n'
        'wrap = ["taskset", "-c", "{variant}"]\n\n'
        '[[variant]]\nname = "b"\nvars = {bin = "/opt/B"}\nenv = {MODE = "fast"}\n')


def test_placeholders_env_and_wrap(db):
    text = two_sides(variants=VARS, runs=2, warmup=0,
                     workload='argv = ["{bin}/prog", "--side={variant}", "{workload}"]\ncwd = "/srv/{variant}"')
    runner, ex, store = fake_runner(text, db)
    runner.run()
    seen = {}
    for argv, env, cwd in ex.calls:
        seen.setdefault(env["MODE"], (argv, cwd, env))
    argv_a, cwd_a, env_a = seen["slow"]
    argv_b, cwd_b, env_b = seen["fast"]
    assert argv_a == ["taskset", "-c", "a", "/opt/A/prog", "--side=a", "w"] and cwd_a == "/srv/a"
    assert argv_b == ["/opt/B/prog", "--side=b", "w"] and cwd_b == "/srv/b"
    assert env_a["LC_ALL"] == "C" and env_a.get("PATH") == os.environ.get("PATH")
    assert len(ex.calls) == 4
    store.close()


def test_setup_and_teardown_run_when_switching_sides(db, tmp_path):
    log = tmp_path / "log"
    variants = "".join(f'[[variant]]\nname = "{v}"\nsetup = ["echo setup-{{variant}} >> {log}"]\n'
                       f'teardown = ["echo teardown-{{variant}} >> {log}"]\n\n' for v in "ab")
    workload = (f'argv = ["run"]\nsetup = ["echo wsetup >> {log}"]\nteardown = ["echo wteardown >> {log}"]')
    text = two_sides(variants=variants, workload=workload, runs=4, warmup=1)

    def behaviour(argv, env):
        with open(log, "a") as f:
            f.write(f"run-{env['SIDE']}\n")
        return FakeOutcome(wall_s=0.5)

    text = text.replace('name = "a"\n', 'name = "a"\nenv = {SIDE = "a"}\n').replace(
        'name = "b"\n', 'name = "b"\nenv = {SIDE = "b"}\n')
    runner, ex, store = fake_runner(text, db, behaviour)
    runner.run()
    expected, current = ["wsetup"], None
    for p in make_plan(runner.exp):
        if p.variant != current:
            if current:
                expected.append(f"teardown-{current}")
            expected.append(f"setup-{p.variant}")
            current = p.variant
        expected.append(f"run-{p.variant}")
    expected += [f"teardown-{current}", "wteardown"]
    assert log.read_text().split() == expected
    assert sum(x.startswith("setup-") for x in expected) > 2  # the plan really switches back and forth
    store.close()


FAILURES = {
    "exit": (FakeOutcome(wall_s=1.0, exit_code=1, stderr=b"noise\nboom: disk full\n"),
             "exit status 1: boom: disk full"),
    "signal": (FakeOutcome(wall_s=1.0, signal=signal.SIGSEGV), "killed by SIGSEGV"),
    "timeout": (FakeOutcome(wall_s=5.0, timed_out=True, signal=signal.SIGKILL), "timed out after 5 s"),
    "no start": (FakeOutcome(error="cannot execute './nope': No such file or directory"),
                 "cannot execute './nope': No such file or directory"),
}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_failed_run_stored_with_reason_and_reported(db, kind):
    outcome, reason = FAILURES[kind]
    text = two_sides(runs=6, warmup=1, workload='argv = ["sleep", "1"]\ntimeout = 5')
    runner, ex, store = fake_runner(text, db, _counting({4: outcome}))
    result = runner.run()
    assert result.status == "finished" and result.runs_failed == 1
    rows = runs_table(db)
    assert len(rows) == 14
    assert [(r[0], r[4]) for r in rows if r[3] == "failed"] == [(3, reason)]
    side = rows[3][1]
    analysis = analyse(store, "t")
    assert analysis.runs_per_side[side] == 5
    report = " ".join(render(analysis, "text").split())  # lines may wrap anywhere
    assert f"Failed runs on {side}: 1 ({reason})" in report
    assert f"w: 1 failed run(s) on {side} (first: {reason})" in report
    store.close()


def test_failed_warmup_is_not_counted_against_the_policy(db):
    text = two_sides(runs=3, warmup=2, extra_experiment="max_failures = 0")
    bad = FakeOutcome(exit_code=1)
    runner, ex, store = fake_runner(text, db, _counting({1: bad, 2: bad, 3: bad}))
    result = runner.run()
    assert result.status == "finished" and result.runs_failed == 0
    assert [r[3] for r in runs_table(db)][:3] == ["failed"] * 3


def test_failure_policy_aborts_and_resume_continues(db):
    text = two_sides(runs=10, warmup=0, extra_experiment="max_failures = 2")
    bad = FakeOutcome(wall_s=1.0, exit_code=3, stderr=b"it broke\n")
    runner, ex, store = fake_runner(text, db, lambda argv, env: bad)
    with pytest.raises(PerfabError) as info:
        runner.run()
    message = str(info.value)
    assert "\n" not in message and "aborted after 3 failed runs" in message
    assert "exit status 3: it broke" in message and "--resume" in message
    assert len(runs_table(db)) == 3
    assert store.sessions("t")[-1].status == "aborted"
    runner2, _, store2 = fake_runner(text, db)
    result = runner2.run(resume=True)
    assert result.status == "finished" and result.runs_done == 17
    rows = runs_table(db)
    assert len(rows) == 20 and len({r[0] for r in rows}) == 20
    assert Counter(r[3] for r in rows) == {"ok": 17, "failed": 3}
    store.close()
    store2.close()


def _kill_on(call: int, times: int = 1):
    def hook(n):
        if n == call:
            for _ in range(times):
                os.kill(os.getpid(), signal.SIGINT)
    return hook


@pytest.fixture
def python_sigint():
    """SIGINT handled by Python, as a terminal starts it (a background job starts with it ignored, and the runner
    restores the handler it found); the one before restored after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_first_sigint_stops_after_the_run_in_flight(db, python_sigint):
    text = two_sides(runs=5, warmup=1)
    runner, ex, store = fake_runner(text, db, _counting({}, hook=_kill_on(5)))
    result = runner.run()
    assert result.status == "interrupted" and result.runs_done == 5
    rows = runs_table(db)
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4] and all(r[3] == "ok" for r in rows)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert store.sessions("t")[-1].status == "interrupted"
    result = runner.run(resume=True)
    assert result.status == "finished" and result.runs_done == 12 - 5
    rows = runs_table(db)
    assert [r[0] for r in rows] == list(range(12)) and all(r[3] == "ok" for r in rows)
    assert len(store.sessions("t")) == 1
    store.close()


def test_second_sigint_abandons_the_run_in_flight(db):
    text = two_sides(runs=5, warmup=1)
    runner, ex, store = fake_runner(text, db, _counting({}, hook=_kill_on(5, times=2)))
    result = runner.run()
    assert result.status == "interrupted"
    rows = runs_table(db)
    assert len(rows) == 5 and rows[-1][3:] == ("interrupted", "abandoned at SIGINT")
    assert [p.seq for p in store.remaining(result.session)][0] == 4
    runner.run(resume=True)
    rows = runs_table(db)  # every attempt: the abandoned one is kept, its re-run stored beside it
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4, 4, *range(5, 12)]
    assert rows[4][3:] == ("interrupted", "abandoned at SIGINT") and rows[5][3] == "ok"
    assert len(ex.calls) == 13  # the abandoned run ran again
    counted = store.run_rows("t")
    assert [r["seq"] for r in counted] == list(range(12)) and all(r["status"] == "ok" for r in counted)
    store.close()


def test_resume_with_changed_spec_is_refused(db):
    text = two_sides(runs=5, warmup=1)
    runner, ex, store = fake_runner(text, db, _counting({}, hook=_kill_on(3)))
    runner.run()
    changed, _, store2 = fake_runner(text.replace("runs = 5", "runs = 6"), db)
    with pytest.raises(UsageError) as info:
        changed.run(resume=True)
    assert "changed since session" in str(info.value) and "--new-session" in str(info.value)
    assert len(runs_table(db)) == 3
    store.close()
    store2.close()


def test_run_again_while_unfinished_is_refused_with_the_fix(db):
    text = two_sides(runs=5, warmup=1)
    runner, ex, store = fake_runner(text, db, _counting({}, hook=_kill_on(3)))
    runner.run()
    with pytest.raises(UsageError) as info:
        runner.run()
    message = str(info.value)
    assert "unfinished session (9 runs left)" in message
    assert "--resume" in message and "--new-session" in message
    result = runner.run(new_session=True)
    assert result.status == "finished" and len(store.sessions("t")) == 2


def test_resume_without_unfinished_session_is_refused(db):
    runner, ex, store = fake_runner(two_sides(runs=2, warmup=0), db)
    runner.run()
    with pytest.raises(UsageError) as info:
        runner.run(resume=True)
    assert "no unfinished session" in str(info.value)


def test_session_keeps_spec_and_environment(db):
    text = two_sides(runs=2, warmup=0)
    runner, ex, store = fake_runner(text, db, env={"kernel.release": "x"})
    runner.run()
    (session,) = store.sessions("t")
    from perfab.run.layout import LAYOUT

    assert session.spec_text == text and session.environment == {"kernel.release": "x", "layout": LAYOUT}
    assert session.status == "finished" and session.backend == "time"
    assert parse_spec(session.spec_text).runs == 2


def test_unknown_placeholder_stops_before_a_session_is_stored(db):
    """A misspelt placeholder left an unfinished session that the fixed spec could neither resume nor rerun."""
    from perfab.errors import SpecError

    bad = two_sides(workload='argv = ["echo", "{nope}"]')
    runner, ex, store = fake_runner(bad, db)
    with pytest.raises(SpecError, match=r"unknown placeholder \{nope\}"):
        runner.run()
    assert ex.calls == [] and store.unfinished_session("t") is None
    wrapped = two_sides(variants='[[variant]]\nname = "a"\nwrap = ["{nope}"]\n\n[[variant]]\nname = "b"\n')
    with pytest.raises(SpecError, match=r"unknown placeholder \{nope\}"):
        fake_runner(wrapped, db)[0].run()
    fixed, _, store2 = fake_runner(two_sides(), db)
    assert fixed.run().status == "finished"
    store.close()
    store2.close()


EXTERNAL = ('[[variant]]\nname = "old"\nexternal = true\ndetect = "echo kernel-6.1"\ndetect_pattern = "6\\\\.1$"\n\n'
            '[[variant]]\nname = "new"\nexternal = true\ndetect = "echo kernel-6.1"\ndetect_pattern = "6\\\\.9$"\n')


def test_external_sides_run_one_per_session_by_detection(db):
    text = two_sides(variants=EXTERNAL, runs=3, warmup=1)
    runner, ex, store = fake_runner(text, db)
    first = runner.run()
    assert first.side == "old" and {r[1] for r in runs_table(db)} == {"old"}
    with pytest.raises(UsageError, match="not external"):
        fake_runner(two_sides(), db)[0].run(side="a")
    second = runner.run(side="new")
    assert second.side == "new" and len(runs_table(db)) == 8
    analysis = analyse(store, "t")
    assert analysis.runs_per_side == {"old": 3, "new": 3}
    assert any(w.kind == Kind.ONE_SESSION and w.data["side"] == "old" and "one session (boot) of side 'old'" in w.text
               for w in analysis.warnings)
    store.close()


def test_external_side_detection_must_match_exactly_one(db):
    text = two_sides(variants=EXTERNAL.replace("6\\\\.9$", "kernel"), runs=2, warmup=0)
    runner, ex, store = fake_runner(text, db)
    with pytest.raises(UsageError, match=r"several sides \(old, new\).*--side NAME"):
        runner.run()
    assert store.experiments() == []


class _FlakyTool(SameForEverySide, declaration=TIME):
    """A backend whose tool loses every third run's readings, as perf stat 6.1 loses a short workload's status."""

    def __init__(self):
        self.calls = 0

    def prepare(self, variants, say):
        return None

    def for_side(self, variant, workload):
        return self

    def groups(self):
        return ((),)

    def wrap(self, argv, scratch, group):
        return list(argv)

    def collect(self, scratch, group, status):
        from perfab.run.backends import Measurement

        self.calls += 1
        if self.calls % 3 == 0:
            return Measurement({}, failure="the tool lost the workload's exit status", transient=True)
        return Measurement({})

    def metric_info(self):
        return {}


def test_a_run_lost_by_the_measuring_tool_runs_again_and_both_attempts_are_kept(db):
    from perfab.run.runner import Runner
    from perfab.specfile import parse_spec
    from perfab.store import Store

    from core_helpers import FIXED_ENV
    from perfab.run.executor import FakeExecutor

    store = Store(db)
    tool = _FlakyTool()
    result = Runner(parse_spec(two_sides(runs=6, warmup=0)), store, tool, FakeExecutor(), dict(FIXED_ENV)).run()
    assert result.status == "finished" and result.runs_failed == 0
    counted = store.run_rows("t")
    every = store.run_rows("t", all_attempts=True)
    assert len(counted) == 12 and all(r["status"] == "ok" for r in counted)
    lost = [r for r in every if r["status"] == "failed"]
    assert len(lost) == tool.calls - 12 >= 3 and all("lost the workload's exit status" in r["reason"] for r in lost)
    store.close()
