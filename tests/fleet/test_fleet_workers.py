"""Two worker processes stand in for two lab machines sharing one PostgreSQL store and queue."""

from __future__ import annotations

import io
import os
import signal

from perfab.cli import main
from perfab.fleet import by_machine
from perfab.store import open_store


def _report(lab, name: str, db: str) -> str:
    """The report, less what the machine's load wrote into it (other work measured over the runs)."""
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", name, "--db", db if "://" in db else str(lab.root / db)], out, err) == 0, err.getvalue()
    return _without_load(out.getvalue())


def _without_load(text: str) -> str:
    """``text`` without SETUP's "Other work" line and the busy-machine warning, each with its wrapped lines."""
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("Other work:", "- busy machine:", "busy machine:", "WARNING: busy machine")):
            skipping = True
            continue
        if skipping and line.startswith("    "):
            continue
        skipping = False
        kept.append(line)
    return "".join(kept)


def _reference(lab, spec: str, name: str) -> str:
    """The same spec run on this one machine into SQLite, as perfab run does: its report."""
    done = lab.perfab("run", spec, "--db", "single.db", "--no-report")
    assert done.returncode == 0, done.stderr
    return _report(lab, name, "single.db")


def _all_succeeded(lab, names):
    jobs = lab.jobs()
    return all(jobs.get(n, ("",))[0] == "succeeded" for n in names) and jobs


def test_jobs_are_split_between_machines_none_runs_twice_and_reports_match_one_machine(lab):
    names = [f"opt-{i}" for i in range(3)]
    specs = [lab.write_spec(n, 20000 + 5000 * i) for i, n in enumerate(names)]
    workers = [lab.worker("m1"), lab.worker("m2")]
    lab.wait("both workers to serve", lambda: all(w.ready() for w in workers))
    queued = lab.perfab("submit", *specs, "--db", lab.url, "--machines", "vm")
    assert queued.returncode == 0 and queued.stdout.count("queued as job") == 3, queued.stdout + queued.stderr
    lab.wait("every job to succeed", lambda: _all_succeeded(lab, names), timeout=90)
    assert [w.stop() for w in workers] == [0, 0] and all("stopped" in w.text() for w in workers)

    started = lab.query("SELECT j.args->>'experiment', count(*) FROM procrastinate_events e "
                        "JOIN procrastinate_jobs j ON j.id = e.job_id WHERE e.type = 'started' GROUP BY 1")
    assert sorted(started) == [(n, 1) for n in names]  # each job ran once
    with open_store(lab.url, readonly=True) as store:
        hosts = {}
        for name in names:
            (session,) = store.sessions(name)
            rows = store.run_rows(name, all_attempts=True)
            assert session.status == "finished" and [r["attempt"] for r in rows] == [1, 1]
            hosts[name] = session.host
            (machine,) = by_machine(store.load(name))
            assert (machine.name, machine.machine_class) == (session.host, "vm")
            assert session.environment["fleet.machine"] == session.host
    assert set(hosts.values()) == {"m1", "m2"}, hosts  # both machines took work
    for spec, name in zip(specs, names):
        assert _report(lab, name, lab.url) == _reference(lab, spec, name)


def test_a_killed_workers_job_resumes_on_its_machine_without_losing_or_duplicating_runs(lab):
    spec = lab.write_spec("resumed", 60000, runs=3)
    first, other = lab.worker("m1"), lab.worker("m2")
    lab.wait("both workers to serve", lambda: first.ready() and other.ready())
    twin = lab.perfab("worker", "--db", lab.url, "--machine-class", "vm", "--machine", "m1", timeout=30)
    assert twin.returncode == 1 and len(twin.stderr.splitlines()) == 1
    assert f"machine m1 is served by another worker (perfab worker m1 pid {first.proc.pid} on " in twin.stderr

    assert lab.perfab("submit", spec, "--db", lab.url, "--machines", "vm").returncode == 0
    holder = lab.wait("a machine to store two runs", lambda: _machine_with_runs(lab, "resumed", 2))
    victim, survivor = (first, other) if holder == "m1" else (other, first)
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait()
    stored = _stored(lab, "resumed")
    assert 2 <= stored < 6
    lab.wait("the job to move to its machine's queue",
             lambda: lab.jobs()["resumed"] == ("todo", f"perfab/vm/{holder}"), timeout=30)
    assert "lost its worker; put back into perfab/vm" in survivor.text()
    assert f"belongs to machine {holder}; moved to that machine's queue" in survivor.text()
    assert _stored(lab, "resumed") == stored  # the other machine ran none of it

    back = lab.worker(holder)
    lab.wait("the resumed job to succeed", lambda: _all_succeeded(lab, ["resumed"]), timeout=60)
    assert "resumed: session 1 finished" in back.text()
    with open_store(lab.url, readonly=True) as store:
        (session,) = store.sessions("resumed")
        rows = store.run_rows("resumed", all_attempts=True)
    assert (session.host, session.status) == (holder, "finished")
    assert sorted(r["seq"] for r in rows) == list(range(6)) and {r["attempt"] for r in rows} == {1}
    assert {r["status"] for r in rows} == {"ok"}
    assert _report(lab, "resumed", lab.url) == _reference(lab, spec, "resumed")


def _stored(lab, name: str) -> int:
    return lab.query("SELECT count(*) FROM perfab.runs r JOIN perfab.planned_runs p ON p.id = r.planned_id "
                     "JOIN perfab.sessions s ON s.id = p.session_id JOIN perfab.experiments e "
                     "ON e.id = s.experiment_id WHERE e.name = %s", (name,))[0][0]


def _machine_with_runs(lab, name: str, n: int) -> str | None:
    if _stored_safely(lab, name) < n:
        return None
    return lab.query("SELECT s.host FROM perfab.sessions s JOIN perfab.experiments e ON e.id = s.experiment_id "
                     "WHERE e.name = %s", (name,))[0][0]


def _stored_safely(lab, name: str) -> int:
    try:
        return _stored(lab, name)
    except Exception:  # noqa: BLE001 - the store's tables may not exist yet
        return 0
