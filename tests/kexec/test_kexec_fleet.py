"""A fleet job whose sides kexec: put back into its machine's queue at each switch, continued after each boot.

The job's function is called as the worker calls it (routing, then the
job), on a store that acts for machine ``m1``, with the fake machine of
``kexec_helpers`` and real runs; the queue's part is the retry decision
``Moves`` takes for the exception the job raises.
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from perfab.cli import main
from perfab.fleet.job import Context, Moves, route
from perfab.fleet.kexecjob import REBOOT_S, Rebooting, run_kexec
from perfab.fleet.machines import SUBMISSION_KEY
from perfab.specfile import load_spec
from perfab.store import open_store

from kexec_helpers import IMAGE, Bench, FakeMachine, host_tree, kexec_spec

pytestmark = pytest.mark.skipif(IMAGE is None, reason="Debian's 6.1 kernel image is not in /boot")


def test_a_kexec_job_waits_in_its_machines_queue_across_each_reboot(tmp_path):
    spec, db = kexec_spec(tmp_path, IMAGE, runs=2), str(tmp_path / "fleet.db")
    exp = load_spec(spec)
    bench = Bench(tmp_path, FakeMachine(host_tree(tmp_path / "root", init="systemd")), tmp_path / "cache")
    ctx = Context(db, "m1", "vm", bench.lines.append)
    env = {SUBMISSION_KEY: "sub-1", "host": "m1"}
    outcomes = []
    try:
        for _ in range(10):
            with open_store(db, machine="m1") as store:
                where = route(store, "kx", "sub-1")
                if where.kind == "done":
                    break
                try:
                    outcomes.append(run_kexec(ctx, store, exp, where.kind == "resume", env, bench.ctx))
                except Rebooting as e:
                    outcomes.append(e)
                    if len(outcomes) == 1:  # taken again before the machine went down: it waits
                        bench.machine.boots -= 1
                        with pytest.raises(Rebooting, match="has not happened yet"):
                            run_kexec(ctx, store, exp, True, env, bench.ctx)
                        bench.machine.boots += 1
    finally:
        bench.close()
    reboots, last = outcomes[:-1], outcomes[-1]
    assert all(isinstance(e, Rebooting) for e in reboots) and isinstance(last, str)
    assert last.startswith("kx: session 1 finished after") and len(reboots) == len(bench.machine.booted)
    decision = Moves().get_retry_exception(reboots[0], SimpleNamespace(queue="perfab/vm")).retry_decision
    assert (decision.queue, decision.priority) == ("perfab/vm/m1", 10)
    assert "continues on machine m1 after its reboot" in str(reboots[0])
    assert decision.retry_at is not None  # taken again REBOOT_S later, when the machine is back
    assert REBOOT_S >= 30
    with open_store(db, machine="m1") as store:
        session = store.sessions("kx")[-1]
        assert session.status == "finished" and session.environment[SUBMISSION_KEY] == "sub-1"
        assert all(r["status"] == "ok" for r in store.run_rows("kx"))
    assert bench.machine.calls[-1] == ("end", "reboot")


def test_a_kexec_job_on_a_machine_without_kexec_fails_in_one_line(tmp_path):
    """On this machine (no kexec in its kernel) the job fails before anything is stored."""
    from pathlib import Path

    from perfab.fleet.job import JobFailed, run_experiment

    if Path("/sys/kernel/kexec_loaded").exists():
        pytest.skip("this machine can kexec")
    spec = kexec_spec(tmp_path, IMAGE)
    ctx = Context(str(tmp_path / "fleet.db"), "m1", "vm", lambda line: None)
    with pytest.raises(JobFailed) as info:
        run_experiment(ctx, spec.read_text(), str(spec), "kx", "sub-1")
    assert "cannot kexec (no /sys/kernel/kexec_loaded" in str(info.value) and "\n" not in str(info.value)
    out = io.StringIO()
    assert main(["list", "--db", str(tmp_path / "fleet.db")], out, io.StringIO()) == 0 and out.getvalue() == ""
