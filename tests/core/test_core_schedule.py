"""The session as one schedule of events: built from the plan, grown at looks, printed, checked and executed."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections import Counter
from types import SimpleNamespace

import pytest

from core_helpers import FakeOutcome, cli, fake_runner, two_sides
from perfab.errors import UsageError
from perfab.plan import make_plan
from perfab.run.backends import SameForEverySide
from perfab.run.preflight import preflight
from perfab.run.schedule import (EnterCell, LeaveCell, Look, Run, WorkloadSetup, WorkloadTeardown, new_schedule,
                                 stretch)
from perfab.specfile import parse_spec
from perfab.specfile.backends import TIME

SEQUENTIAL = """
[experiment]
name = "seq"
runs = "auto"
min_runs = 4
max_runs = {max_runs}
warmup = 1

[[variant]]
name = "a"
[[variant]]
name = "b"
env = {{SIDE = "b"}}

[[workload]]
name = "w"
argv = ["w"]
parser = "keyvalue"

[[workload.metric]]
name = "ops/s"
direction = "higher"
primary = true
"""

TWO_WORKLOADS = two_sides(runs=2, warmup=0, workload='argv = ["x"]\nsetup = ["echo up"]\nteardown = ["echo down"]') + \
    '\n[[workload]]\nname = "v"\nargv = ["y"]\n'


def _kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_stretch_opens_each_workload_and_cell_once_and_closes_them_innermost_first():
    exp = parse_spec(TWO_WORKLOADS)
    plan = make_plan(exp)
    events = stretch(plan)
    assert [e.planned for e in events if isinstance(e, Run)] == plan
    setups = [e for e in events if isinstance(e, WorkloadSetup)]
    assert [(s.workload, s.runs) for s in setups] == [("w", 4), ("v", 4)]
    assert Counter(_kinds(events))["WorkloadTeardown"] == 2
    for i, e in enumerate(events):  # every run sits inside an entered cell of its own
        if isinstance(e, Run):
            enter = next(x for x in reversed(events[:i]) if isinstance(x, EnterCell))
            assert enter.cell == (e.planned.workload, e.planned.variant, e.planned.params)
    assert isinstance(events[-2], LeaveCell) and isinstance(events[-1], WorkloadTeardown)
    first_v = _kinds(events).index("WorkloadSetup", 1)
    assert _kinds(events)[first_v - 2:first_v] == ["LeaveCell", "WorkloadTeardown"]


def test_a_sequential_schedule_holds_the_first_blocks_and_a_look_and_grows_one_block_per_look():
    exp = parse_spec(SEQUENTIAL.format(max_runs=8))
    schedule = new_schedule(exp, None, 1, {})
    runs = schedule.runs()
    assert Counter(p.variant for p in runs if not p.warmup) == {"a": 4, "b": 4}
    assert isinstance(schedule.events[-1], Look) and schedule.events[-1].block == 1
    more = schedule.extend()
    assert [p.seq for p in more] == list(range(len(runs), len(runs) + 4))
    assert {p.block for p in more} == {2} and isinstance(schedule.events[-1], Look)
    assert schedule.extend() and not schedule.extend()  # block 3 reaches max_runs = 8: nothing after it
    whole = make_plan(exp)
    grown = [p for p in schedule.runs() if not p.warmup]
    assert [(p.variant, p.block) for p in grown] == [(p.variant, p.block) for p in whole if not p.warmup]


def test_the_possible_schedule_runs_to_max_runs_and_leaves_the_schedule_as_it_was():
    exp = parse_spec(SEQUENTIAL.format(max_runs=10))
    schedule = new_schedule(exp, None, 1, {})
    before = list(schedule.events)
    whole = schedule.possible()
    assert schedule.events == before
    assert Counter(p.variant for p in whole.runs() if not p.warmup) == {"a": 10, "b": 10}
    assert Counter(_kinds(whole.events))["Look"] == 4  # after blocks 1, 2, 3 and 4 (the last may stop too)


def _behaviour(env_side_shift: float):
    def behaviour(argv, env):
        ops = 1_000_000 * (1 + env_side_shift if env.get("SIDE") == "b" else 1.0)
        return FakeOutcome(wall_s=0.01, stdout=f"ops/s: {ops:.0f}\n".encode())

    return behaviour


def _stored_measured(db) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM planned_runs WHERE warmup = 0").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("stop_at_look, measured", [(1, 8), (2, 12), (None, 16)])
def test_the_runner_asks_the_injected_stopping_test_at_each_look_and_grows_only_when_told(db, stop_at_look, measured):
    runner, _, store = fake_runner(SEQUENTIAL.format(max_runs=8), db, _behaviour(0.0))
    looks = []

    def stopping(store_, exp):
        looks.append(len(looks) + 1)
        stop = len(looks) == stop_at_look
        return SimpleNamespace(stop=stop, reason=f"told at look {len(looks)}", look=len(looks), runs_per_side=0)

    runner.stopping = stopping
    result = runner.run()
    stop_reason = store.sessions("seq")[-1].stop_reason
    store.close()
    assert result.status == "finished"
    assert _stored_measured(db) == measured
    assert looks == list(range(1, (stop_at_look or 3) + 1))  # never stopped: a look after each of 3 blocks
    assert stop_reason == f"told at look {stop_at_look or 3}"


def test_perfab_plan_prints_a_sequential_schedule_with_its_looks(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SEQUENTIAL.format(max_runs=8))
    code, out, err = cli("plan", str(spec))
    assert code == 0, err
    lines = out.splitlines()
    looks = [i for i, line in enumerate(lines) if line.lstrip().startswith("? look")]
    assert [lines[i].split()[4] for i in looks] == ["1:", "2:", "3:"]
    runs = [line for line in lines if line[:5].strip().isdigit()]
    assert len(runs) == 2 + 16  # warm-ups, then every run up to max_runs
    assert [int(line.split()[0]) for line in runs] == list(range(18))


def test_preflight_checks_every_cell_of_the_schedule(tmp_path):
    exp = parse_spec(two_sides(workload='argv = ["{missing}"]', runs=2))
    with pytest.raises(UsageError, match="missing"):
        preflight(exp, new_schedule(exp, None, 1, {}), lambda v: {}, programs=False)
    only_b = parse_spec(two_sides(runs=2, variants='[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n'
                                                   'wrap = ["/no/such/wrapper"]\n'))
    preflight(only_b, new_schedule(only_b, ["a"], 1, {}), lambda v: {"PATH": "/usr/bin:/bin"})
    with pytest.raises(UsageError, match="wrap\\[0\\] '/no/such/wrapper' does not exist"):
        preflight(only_b, new_schedule(only_b, None, 1, {}), lambda v: {"PATH": "/usr/bin:/bin"})


class _LastWords(SameForEverySide, declaration=dataclasses.replace(TIME, name="lastwords")):
    """A backend that reads the run's stderr tail from the scratch file it names."""

    stderr_file = "tool-stderr"

    def __init__(self):
        self.read: list[str] = []

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

        path = scratch / self.stderr_file
        self.read.append(path.read_text() if path.exists() else "")
        return Measurement({})

    def metric_info(self):
        return {}


def test_the_runner_writes_the_stderr_tail_where_the_backend_says_and_nowhere_else(db):
    from core_helpers import FIXED_ENV
    from perfab.run.executor import FakeExecutor
    from perfab.run.runner import Runner
    from perfab.store import Store

    def behaviour(argv, env):
        return FakeOutcome(wall_s=0.01, stderr=b"last words of " + env.get("SIDE", "a").encode())

    backend = _LastWords()
    store = Store(db)
    exp = parse_spec(two_sides(runs=2, warmup=0, variants='[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n'
                                                          'env = {SIDE = "b"}\n'))
    result = Runner(exp, store, backend, FakeExecutor(behaviour), dict(FIXED_ENV)).run()
    store.close()
    assert result.status == "finished"
    assert sorted(set(backend.read)) == ["last words of a", "last words of b"] and len(backend.read) == 4
