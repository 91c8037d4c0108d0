"""A kexec session walked from boot to boot on a machine that "reboots" by changing the kernel it reports.

The runs are real (``/bin/true`` under the time backend, the real executor,
a real SQLite store); the machine is ``FakeMachine``: ``switch`` makes it
report the loaded kernel, as the real one does after the reboot, or the
fallback kernel when the side's kernel is made to fail.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from perfab.errors import UsageError
from perfab.kexec import boots, driver
from perfab.kexec.identity import KernelIdentity, boot_token
from perfab.plan import make_plan
from perfab.specfile import load_spec
from perfab.store import open_store

from kexec_helpers import HOME, IMAGE, Bench, FakeMachine, host_tree, kexec_spec

pytestmark = pytest.mark.skipif(IMAGE is None, reason="Debian's 6.1 kernel image is not in /boot")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """Facts read from the image once for the module (unpacking it takes seconds)."""
    return tmp_path_factory.mktemp("kcache")


@pytest.fixture
def bench(tmp_path: Path, cache: Path):
    b = Bench(tmp_path, FakeMachine(host_tree(tmp_path / "root")), cache)
    yield b
    b.close()


def _walk(bench: Bench, spec: Path, db: Path, limit: int = 20) -> list[driver.Step]:
    """``perfab run`` on the spec, then what the unit does after every boot, until the session ends."""
    exp = load_spec(spec)
    steps = []
    with open_store(db) as store:
        steps.append(driver.begin(exp, store, bench.ctx, str(db)))
    for _ in range(limit):
        state = bench.states.read()
        if state is None:
            return steps
        with open_store(db) as store:
            steps.append(driver.proceed(state, load_spec(spec), store, bench.ctx))
    raise AssertionError(f"the session did not end within {limit} boots: {steps}")


def _report(db: Path) -> str:
    """The text report of the session: its SETUP names the kernels in the order they ran."""
    from perfab.analyse.compare import analyse
    from perfab.report import render

    with open_store(db) as store:
        return render(analyse(store, "kx"), "text")


def test_a_session_switches_kernel_where_the_plan_switches_side(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE, runs=4), tmp_path / "r.db"
    steps = _walk(bench, spec, db)
    plan_sides = [p.variant for p in make_plan(load_spec(spec))]
    expected = [seg[0].variant for seg in boots.segments(make_plan(load_spec(spec)))]
    assert steps[-1].kind == "finished" and list(steps[-1].order) == expected
    assert len(expected) < len(plan_sides)  # ABBA: a side's two runs in a row share a boot
    assert {"on", "off"} == set(expected) and len(expected) >= 3
    loads = [c for c in bench.machine.calls if c[0] == "load"]
    assert len(loads) == len(expected)  # the first side too is kexec'd into
    for (_, image, line), side, number in zip(loads, expected, range(1, 10)):
        assert image == str(IMAGE) and f"perfab.boot=s1.b{number}" in line and "panic=10" in line
        assert ("pti=on" if side == "on" else "pti=off") in line.split()
        assert "BOOT_IMAGE=/boot/vmlinuz" not in line and "root=/dev/sda1" in line  # the home line, less its image
    assert bench.machine.calls[-1] == ("end", "reboot")
    with open_store(db) as store:
        rows = store.run_rows("kx")
        session = store.sessions("kx")[-1]
    assert [r["variant"] for r in rows] == plan_sides and all(r["status"] == "ok" for r in rows)
    assert session.status == "finished"
    assert session.environment["kexec.boots"] == " ".join(f"{i}:{s}:confirmed" for i, s in enumerate(expected, 1))
    assert f"kernels  : {' -> '.join(expected)} (a kexec per boot)" in _report(db)


def test_between_boots_the_session_is_unfinished_and_claimed_by_no_one(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    with open_store(db) as store:
        step = driver.begin(load_spec(spec), store, bench.ctx, str(db))
    assert step.kind == "switching"
    with open_store(db) as store:
        session = store.sessions("kx")[-1]
        assert session.status == driver.PAUSED and session.owner is None
        assert store.unfinished_session("kx").id == session.id
    state = bench.states.read()
    assert state.pending.number == 1 and boot_token(bench.machine.current.cmdline) == state.pending.token


def test_a_side_whose_kernel_does_not_come_back_fails_and_the_session_stops(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE, runs=2), tmp_path / "r.db"
    exp = load_spec(spec)
    with open_store(db) as store:
        driver.begin(exp, store, bench.ctx, str(db))
        first = bench.states.read()
        bench.machine.fail_next = True  # the second boot's kernel panics: the firmware boots the default entry
        driver.proceed(first, exp, store, bench.ctx)
        second = bench.states.read()
        assert bench.machine.current == HOME
        step = driver.proceed(second, exp, store, bench.ctx)
        rows = store.run_rows("kx")
        session = store.sessions("kx")[-1]
    assert step.kind == "failed" and "did not" not in step.text
    assert f"kexec boot 2 into side {second.pending.side} failed" in step.text
    assert "the firmware booted the default entry" in step.text and "the kernel the session began in" in step.text
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == second.pending.runs and {r["variant"] for r in failed} == {second.pending.side}
    assert all("no perfab.boot=s1.b2 on the command line" in r["reason"] for r in failed)
    assert session.status == "aborted" and bench.states.read() is None
    assert session.environment["kexec.boots"].endswith(f"2:{second.pending.side}:failed")
    assert f"{first.pending.side} -> {second.pending.side} (boot 2 failed) (a kexec per boot)" in _report(db)


def test_a_kernel_that_goes_down_during_its_runs_fails_its_side(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    exp = load_spec(spec)
    with open_store(db) as store:
        driver.begin(exp, store, bench.ctx, str(db))
        state = bench.states.read()
        running = replace(state, pending=replace(state.pending, outcome="confirmed"))  # its runs had begun
        bench.machine.current = HOME  # ... and the machine came back in the fallback kernel
        step = driver.proceed(running, exp, store, bench.ctx)
    assert step.kind == "failed" and "went down during the side's runs" in step.text


def test_a_kernel_that_comes_back_past_its_deadline_fails(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    exp = load_spec(spec)
    with open_store(db) as store:
        driver.begin(exp, store, bench.ctx, str(db))
        state = bench.states.read()
        late = replace(state, pending=replace(state.pending, at=state.pending.at - 301))
        step = driver.proceed(late, exp, store, bench.ctx)
    assert step.kind == "failed" and "past its boot_timeout of 300 s" in step.text


def test_a_wrong_build_behind_the_right_token_is_not_confirmed(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    exp = load_spec(spec)
    with open_store(db) as store:
        driver.begin(exp, store, bench.ctx, str(db))
        state = bench.states.read()
        bench.machine.current = replace(bench.machine.current, build_id="00" * 20)
        step = driver.proceed(state, exp, store, bench.ctx)
    assert step.kind == "failed" and "build id is 0000" in step.text


def test_an_interrupted_boot_is_switched_to_again(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    exp = load_spec(spec)
    with open_store(db) as store:
        driver.begin(exp, store, bench.ctx, str(db))
        state = bench.states.read()
        bench.states.write(replace(state, pending=None))  # e.g. the load of the next side was refused
        step = driver.proceed(bench.states.read(), exp, store, bench.ctx)
    assert step.kind == "switching" and bench.states.read().pending.side == state.pending.side


def test_a_changed_spec_and_a_second_session_are_refused(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    with open_store(db) as store:
        driver.begin(load_spec(spec), store, bench.ctx, str(db))
        with pytest.raises(UsageError, match="a kexec session is in progress on this machine"):
            driver.begin(load_spec(spec), store, bench.ctx, str(db), new_session=True)
        changed = kexec_spec(tmp_path, IMAGE, runs=3)
        with pytest.raises(UsageError, match="changed since session 1 began"):
            driver.proceed(bench.states.read(), load_spec(changed), store, bench.ctx)


def test_the_home_kernel_is_kexecd_back_into_when_asked(bench, tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE, runs=1), tmp_path / "r.db"
    release = IMAGE.name.removeprefix("vmlinuz-")
    bench.machine.current = KernelIdentity(release, "root=/dev/sda1 ro", None)
    exp = load_spec(spec)
    with open_store(db) as store:
        driver.begin(exp, store, bench.ctx, str(db), then="home")
    while (state := bench.states.read()) is not None:
        with open_store(db) as store:
            step = driver.proceed(state, exp, store, bench.ctx)
    assert step.kind == "finished"
    last_load = [c for c in bench.machine.calls if c[0] == "load"][-1]
    assert last_load == ("load", str(IMAGE), "root=/dev/sda1 ro") and bench.machine.calls[-1] == ("switch",)


def test_a_resume_before_the_machine_went_down_waits(bench, tmp_path):
    """A fleet worker may take the job again before the switch: the same boot id means nothing happened yet."""
    spec, db = kexec_spec(tmp_path, IMAGE), tmp_path / "r.db"
    exp = load_spec(spec)
    with open_store(db) as store:
        driver.begin(exp, store, bench.ctx, str(db))
        state = bench.states.read()
        bench.machine.boots -= 1  # the reboot has not happened yet
        step = driver.proceed(state, exp, store, bench.ctx)
        assert store.run_rows("kx") == []
    assert step.kind == "waiting" and "has not happened yet" in step.text
    assert bench.states.read() == state
