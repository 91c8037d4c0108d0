"""A service is started per side with that side's placeholders, watched during runs, and always stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core_helpers import cli, free_port, port_refuses, two_sides
from perfab.run.backends import TimeBackend
from perfab.run.executor import RealExecutor
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Store

FETCH = ("import sys, urllib.request; "
         "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())")


def _site(tmp_path):
    for side in "ab":
        (tmp_path / "www" / side).mkdir(parents=True, exist_ok=True)
        (tmp_path / "www" / side / "id.txt").write_text(f"served by {side}\n")


def _spec(tmp_path, port: int, runs: int = 3, extra: str = "") -> str:
    _site(tmp_path)
    workload = (f'argv = ["{sys.executable}", "-c", "{FETCH}", "http://127.0.0.1:{port}/id.txt"]\ntimeout = 20\n'
                f'{extra}\n[workload.service]\nargv = ["{sys.executable}", "-m", "http.server", "{port}", '
                f'"--bind", "127.0.0.1", "--directory", "{tmp_path}/www/{{variant}}"]\nport = {port}\n'
                f'log = "{tmp_path}/logs"\n')
    return two_sides(runs=runs, warmup=0, workload=workload)


def test_each_side_talks_to_its_own_server(tmp_path):
    """The service was started once with the first side's placeholders: an A/B of two configs measured one."""
    port = free_port()
    db = tmp_path / "r.db"
    with Store(db) as store:
        result = Runner(parse_spec(_spec(tmp_path, port)), store, TimeBackend(), RealExecutor(), {}).run()
        assert result.status == "finished"
        runs = store.run_rows("t")
        assert {r["status"] for r in runs} == {"ok"}
        served = {(r["variant"], store.output(r["run_id"])[0].decode().strip()) for r in runs}
    assert served == {("a", "served by a"), ("b", "served by b")}
    assert port_refuses(port)
    logs = sorted((tmp_path / "logs" / "t").glob("w-*/service-*.log"))
    assert len(logs) >= 3  # a start per switch of side: the interleaved plan switches back and forth


def test_plan_shows_each_sides_service_start(tmp_path):
    port = free_port()
    spec = tmp_path / "s.toml"
    spec.write_text(_spec(tmp_path, port, runs=2))
    code, out, err = cli("plan", str(spec))
    assert code == 0, err
    starts = [line for line in out.splitlines() if "> start service" in line]
    assert any("www/a" in line for line in starts) and any("www/b" in line for line in starts)
    assert out.count("< stop service") == len(starts)


def test_a_service_that_dies_fails_the_run_with_the_reason_and_is_restarted(tmp_path):
    port = free_port()
    flag = tmp_path / "killed"
    # The workload kills the server the first time, so that run (and only it) fails.
    kill_once = (f"import os, signal, sys, urllib.request; p = '{flag}'\\n"
                 "if not os.path.exists(p):\\n"
                 "    open(p, 'w').close(); os.kill(int(open(sys.argv[2]).read()), signal.SIGKILL)\\n"
                 "print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())")
    text = _spec(tmp_path, port, runs=3)
    text = text.replace(f'"-c", "{FETCH}", "http://127.0.0.1:{port}/id.txt"',
                        f'"-c", "{kill_once}", "http://127.0.0.1:{port}/id.txt", "{tmp_path}/pgid"')
    text = text.replace('[workload.service]\nargv = [',
                        '[workload.service]\nargv = '
                        f'["/bin/sh", "-c", "echo $$ > {tmp_path}/pgid; exec \\"$0\\" \\"$@\\"", ')
    db = tmp_path / "r.db"
    with Store(db) as store:
        result = Runner(parse_spec(text), store, TimeBackend(), RealExecutor(), {}).run()
        runs = store.run_rows("t")
    failed = [r for r in runs if r["status"] == "failed"]
    assert result.status == "finished" and len(failed) == 1, [(r["status"], r["reason"]) for r in runs]
    assert failed[0]["reason"].startswith("the service exited before or during the run (log: ")
    assert sum(r["status"] == "ok" for r in runs) == 5
    assert port_refuses(port)


def test_sigterm_stops_the_service_and_leaves_the_session_resumable(tmp_path):
    port = free_port()
    spec = tmp_path / "s.toml"
    spec.write_text(_spec(tmp_path, port, runs=16))  # a run starts a server per switch of side: 0.1 s at least
    db = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "perfab.cli", "run", str(spec), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and port_refuses(port):
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert port_refuses(port)
    con = sqlite3.connect(db)
    status, owner = con.execute("SELECT status, owner FROM sessions").fetchone()
    con.close()
    assert status == "interrupted" and owner is None
    code, _, err = cli("run", str(spec), "--db", str(db), "--resume", "--no-report")
    assert code == 0, err
    assert port_refuses(port)
    os.environ.get("PATH")  # nothing left running: the port refuses after both sessions


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is installed by make test")
@pytest.mark.parametrize("how", ['counters = "pids"', 'counters = "cpus"\ncpus = "0-1"'])
def test_the_perf_backend_counts_the_server_too(tmp_path, how):
    port = free_port()
    text = _spec(tmp_path, port, runs=2).replace(f'log = "{tmp_path}/logs"', f'log = "{tmp_path}/logs"\n{how}')
    text += '\n[measure]\nbackend = "perf"\ncounters = ["task-clock", "context-switches"]\n'
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    code, out, err = cli("run", str(spec), "--db", str(tmp_path / "r.db"), "--format", "json")
    assert code == 0, err
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    server = rows["service.task-clock"]
    assert server["source"] == "service" and server["n_base"] == server["n_exp"] == 2
    assert all(v > 0 for v in server["base_values"] + server["exp_values"])  # the server did work in each run
    assert "task-clock" in rows  # and the client was counted as before


def test_a_server_whose_system_calls_cannot_be_read_gives_no_reading_not_zero():
    """A zero for a failed read was analysed as a real run: /proc/PID/io of a process perfab may not read (pid 1 in
    this container, another user's server) gave 0 read and write calls.  Now the run's calls are left out with the
    reason, and its CPU times stand."""
    from perfab.run.around import _with_usage
    from perfab.run.proctree import io_counts
    from perfab.store import RunRecord

    own = io_counts([os.getpid()])
    assert set(own) == {"syscr", "syscw"} and own["syscr"] > 0  # a process we may read
    try:
        open("/proc/1/io").read()
        pytest.skip("this machine lets perfab read pid 1's /proc/PID/io: no unreadable process to try")
    except PermissionError:
        pass
    assert io_counts([os.getpid(), 1]) == {}  # one unreadable process: the total is no reading
    spec = parse_spec(_spec(Path("/tmp"), 1), "s.toml")
    workload = spec.workloads[0]
    rec = RunRecord("ok", None, 0.0, 1.0, 0.1, 0.0, 1, 0, 0, 0, None, False, b"", b"", 0, 0)
    before = {"user_s": 0.0, "sys_s": 0.0, "run_ns": 0.0}
    after = {"user_s": 0.02, "sys_s": 0.01, "run_ns": 0.0}
    out = _with_usage(rec, before, after, workload)
    assert out.metrics["service_user_s"] == pytest.approx(0.02) and "service_reads" not in out.metrics
    assert "could not be read" in out.excluded["service_reads"] and "service_writes" in out.excluded
    readable = _with_usage(rec, {**before, "syscr": 5.0, "syscw": 1.0}, {**after, "syscr": 9.0, "syscw": 1.0}, workload)
    assert readable.metrics["service_reads"] == 4.0 and readable.metrics["service_writes"] == 0.0  # a real zero
    assert not readable.excluded
