"""A workload's service (a real server) is up during the runs and stopped afterwards with all it forked, always."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from core_helpers import free_port, port_refuses, runs_table, two_sides
from perfab.errors import PerfabError
from perfab.run.backends import TimeBackend
from perfab.run.executor import RealExecutor
from perfab.run.runner import Runner
from perfab.run.services import Service, run_shell
from perfab.specfile import parse_spec
from perfab.store import Store

FETCH = "import sys, urllib.request; body = urllib.request.urlopen(sys.argv[1], timeout=5).read(); print(len(body))"


def _spec(port: int, tmp_path, fetch_url: str | None = None, extra_workload: str = "", variants: str = "") -> str:
    (tmp_path / "www").mkdir(exist_ok=True)
    (tmp_path / "www" / "hello.txt").write_text("hello from the service\n")
    url = fetch_url or f"http://127.0.0.1:{port}/hello.txt"
    workload = (f'argv = ["{sys.executable}", "-c", "{FETCH}", "{url}"]\ntimeout = 20\n{extra_workload}\n'
                f'[workload.service]\nargv = ["{sys.executable}", "-m", "http.server", "{port}", '
                f'"--bind", "127.0.0.1"]\nport = {port}\ncwd = "{tmp_path / "www"}"\n')
    return two_sides(runs=2, warmup=0, workload=workload, variants=variants)


def _run(text: str, db) -> object:
    with Store(db) as store:
        return Runner(parse_spec(text), store, TimeBackend(), RealExecutor(), {}).run()


def test_service_up_during_runs_and_stopped_after(tmp_path, db):
    port = free_port()
    result = _run(_spec(port, tmp_path), db)
    assert result.status == "finished"
    rows = runs_table(db)
    assert [r[3] for r in rows] == ["ok"] * 4
    with Store(db) as store:
        outputs = {store.output(r["run_id"])[0] for r in store.run_rows("t")}
    assert outputs == {b"23\n"}  # every run fetched the file from the service
    assert port_refuses(port)


def test_service_stopped_when_runs_fail(tmp_path, db):
    port = free_port()
    with pytest.raises(PerfabError) as info:  # 4 failures > the default policy's 3
        _run(_spec(port, tmp_path, fetch_url=f"http://127.0.0.1:{port}/missing"), db)
    assert "aborted after 4 failed runs" in str(info.value)
    assert [r[3] for r in runs_table(db)] == ["failed"] * 4
    assert all("HTTP Error 404" in r[4] for r in runs_table(db))
    assert port_refuses(port)


def test_service_stopped_when_variant_setup_fails(tmp_path, db):
    port = free_port()
    variants = '[[variant]]\nname = "a"\nsetup = ["echo no disk >&2; exit 7"]\n\n[[variant]]\nname = "b"\n'
    with pytest.raises(PerfabError) as info:
        _run(_spec(port, tmp_path, variants=variants), db)
    message = str(info.value)
    assert "exited 7 (no disk)" in message and "\n" not in message
    assert port_refuses(port)


def test_workload_setup_failure_leaves_no_service(tmp_path, db):
    port = free_port()
    with pytest.raises(PerfabError) as info:
        _run(_spec(port, tmp_path, extra_workload='setup = ["exit 5"]'), db)
    assert "workload setup `exit 5` exited 5" in str(info.value)
    assert port_refuses(port)
    assert runs_table(db) == []


def test_service_that_never_listens_is_reported(tmp_path, db):
    port, other = free_port(), free_port()
    text = _spec(port, tmp_path).replace(f"port = {port}\n", f"port = {other}\nready_timeout = 1\n")
    with pytest.raises(PerfabError) as info:
        _run(text, db)
    assert f"did not accept connections on 127.0.0.1:{other}" in str(info.value)
    assert port_refuses(port)


# A tiny server: starts a grandchild in a session of its own, writes "<own pid> <grandchild pid>", then
# serves; a connection sending "burn" gets a child that burns 0.3 s of CPU (reaped by the server), one
# sending "orphan" a grandchild in a new session that burns 0.3 s after its parent exited (an orphan).
SERVER = r"""
import os, socket, subprocess, sys, time
port, pidfile = int(sys.argv[1]), sys.argv[2]
escaped = subprocess.Popen(["sleep", "1000"], start_new_session=True)
srv = socket.create_server(("127.0.0.1", port))
with open(pidfile + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {escaped.pid}\n")
os.rename(pidfile + ".tmp", pidfile)
while True:
    conn, _ = srv.accept()
    what = conn.recv(16)
    if what in (b"burn", b"orphan"):
        child = os.fork()
        if child == 0:
            if what == b"orphan":
                os.setsid()
                if os.fork():
                    os._exit(0)
            end = time.process_time() + 0.3
            while time.process_time() < end:
                pass
            os._exit(0)
        os.waitpid(child, 0)
    conn.close()
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _gone_within(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not any(_alive(p) for p in pids)


@pytest.fixture
def server(tmp_path):
    """A Service running SERVER; yields (service, port, server pid, pid of the grandchild in another session)."""
    port, pidfile = free_port(), tmp_path / "pids"
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    with Service([sys.executable, str(script), str(port), str(pidfile)], port, 10, dict(os.environ), None,
                 tmp_path / "logs") as service:
        main, escaped = (int(p) for p in pidfile.read_text().split())
        yield service, port, main, escaped


def _ask(port: int, what: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(what)
        conn.recv(1)  # EOF once the server closed its end


def test_service_stop_kills_a_grandchild_that_left_the_session(server):
    """Regression: only the service's process group was killed; a setsid grandchild lived on."""
    service, port, main, escaped = server
    assert _alive(main) and _alive(escaped)
    service.stop()
    assert _gone_within([main, escaped], 2.0)
    assert port_refuses(port)


def test_alive_turns_false_when_the_server_dies_and_takes_its_tree_along(server):
    service, port, main, escaped = server
    assert service.alive()
    os.kill(main, signal.SIGKILL)
    deadline = time.monotonic() + 2
    while service.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not service.alive() and _gone_within([escaped], 2.0)


def _cpu_grows(service, before: float, by: float, seconds: float = 3.0) -> float:
    deadline = time.monotonic() + seconds
    while True:
        t = service.cpu_times()
        if t.user_s + t.sys_s - before >= by or time.monotonic() > deadline:
            return t.user_s + t.sys_s - before


@pytest.mark.parametrize("what", [b"burn", b"orphan"])
def test_cpu_times_count_workers_and_orphans_of_the_service(server, what):
    service, port, main, escaped = server
    t0 = service.cpu_times()
    _ask(port, what)
    _ask(port, what)
    grown = _cpu_grows(service, t0.user_s + t0.sys_s, 0.58)
    assert 0.58 <= grown < 1.0, grown  # two children of 0.3 s each, whether the server or perfab-exec reaped them
    idle = service.cpu_times()
    time.sleep(0.3)
    later = service.cpu_times()
    assert later.user_s + later.sys_s - idle.user_s - idle.sys_s < 0.05  # an idle server costs nothing


def test_stale_server_on_the_port_is_refused_before_starting_ours(tmp_path):
    port = free_port()
    marker = tmp_path / "started"
    with socket.create_server(("127.0.0.1", port)):
        with pytest.raises(PerfabError) as info:
            with Service(["sh", "-c", f"touch {marker}; exec sleep 60"], port, 5, dict(os.environ), None,
                         tmp_path / "logs"):
                pass
    assert str(info.value) == (f"port {port} already accepts connections (a stale server?): "
                               "stop it or change workload.service.port")
    assert not marker.exists()


def test_failed_start_names_a_log_that_is_still_there(tmp_path):
    logs = tmp_path / "kept" / "logs"
    with pytest.raises(PerfabError) as info:
        with Service(["sh", "-c", "echo boom >&2; exit 3"], free_port(), 5, dict(os.environ), None, logs):
            pass
    message = str(info.value)
    log = Path(message.split("(log: ")[1].split(")")[0])
    assert "\n" not in message and "exited 3 before it was ready" in message
    assert log.parent == logs and log.read_text() == "boom\n"


@pytest.mark.parametrize("argv, env, why", [
    (["sh", "-c", "echo a\0b"], {}, "argv[2] 'echo a\\x00b' contains a NUL byte"),
    (["true"], {"A=B": "1"}, "environment variable name 'A=B' is empty or contains '='"),
])
def test_service_with_strings_exec_cannot_take_is_a_one_line_error(tmp_path, argv, env, why):
    with pytest.raises(PerfabError) as info:
        with Service(argv, None, 5, dict(os.environ, **env), None, tmp_path):
            pass
    assert str(info.value) == f"service {argv[0]!r} cannot start: {why}; fix workload.service"


@pytest.mark.parametrize("command, env, why", [
    ("echo a\0b", {}, "the command contains a NUL byte"),
    ("true", {"A=B": "1"}, "environment variable name 'A=B' is empty or contains '='"),
    ("true", {"": "1"}, "environment variable name '' is empty or contains '='"),
    ("true", {"X": "a\0b"}, "environment variable 'X' contains a NUL byte"),
])
def test_setup_with_strings_exec_cannot_take_is_a_one_line_error(command, env, why):
    """Regression: these raised ValueError tracebacks out of subprocess (or, for an empty name, ran)."""
    with pytest.raises(PerfabError) as info:
        run_shell(command, dict(os.environ, **env), None, "workload setup")
    assert str(info.value) == f"workload setup {command!r} cannot run: {why}; fix it"
