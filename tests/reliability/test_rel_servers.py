"""Hostile services: a server per side that is stale, slow, dead, stubborn or leaves children behind.

The server is a small Python program on 127.0.0.1 written by each test;
the client is ``sh``/``python3``.  Each case checks the exact one line (or
the failed runs and their reason) and that nothing listens on the port and
no process of the service survives afterwards.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path

from reliability_helpers import cli, runs_of, two_sides, write

SERVER = """
import os, signal, socket, subprocess, sys, time
port, side, mode, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
with open(out, "a") as f:
    f.write(f"{side} {os.getpid()}\\n")
if mode == "exit":
    print("cannot bind: config error", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "deaf":
    time.sleep(120)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "orphan":
    child = subprocess.Popen(["setsid", "sleep", "120"])
    with open(out, "a") as f:
        f.write(f"child {child.pid}\\n")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(side.encode())
    c.close()
"""

CLIENT = ("import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5); "
          "print('served_by_b:', 1 if s.recv(16) == b'b' else 0)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return True
    except OSError:
        return False


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def service_spec(tmp_path: Path, port: int, mode: str = "serve", runs: int = 2, ready: float = 10,
                 extra_service: str = "") -> Path:
    server = write(tmp_path / "server.py", SERVER)
    workload = (f'argv = ["{sys.executable}", "-c", "{CLIENT}", "{port}"]\nparser = "keyvalue"\n'
                'parser_options = {higher_is_better = {served_by_b = true}}')
    service = (f'\n[workload.service]\nargv = ["{sys.executable}", "{server}", "{port}", "{{variant}}", "{mode}", '
               f'"{tmp_path}/started"]\nport = {port}\nready_timeout = {ready}\nlog = "{tmp_path}/logs"\n'
               f'{extra_service}')
    return write(tmp_path / "svc.toml", two_sides(workload=workload, runs=runs, extra=service,
                                                  experiment="max_failures = 20"))


def started(tmp_path: Path) -> list[tuple[str, int]]:
    path = tmp_path / "started"
    return [(a, int(b)) for a, b in (line.split() for line in path.read_text().splitlines())] if path.exists() else []


def test_each_side_is_served_by_its_own_server(tmp_path):
    """{variant} in the service argv: side a's runs reach server a, side b's reach server b (never one twice)."""
    port = free_port()
    out = cli("run", service_spec(tmp_path, port), "--db", tmp_path / "r.db", "--format", "csv")
    assert out.code == 0, out.err
    row = next(line for line in out.out.splitlines() if ",served_by_b," in line)
    assert ",0.0,1.0," in row or ",0,1," in row, row
    assert {side for side, _ in started(tmp_path)} == {"a", "b"}
    assert not listening(port) and all(gone(pid) for _, pid in started(tmp_path))


def test_plan_shows_a_service_start_per_side(tmp_path):
    """`perfab plan` lists the service started for each side, with that side's argv."""
    out = cli("plan", service_spec(tmp_path, free_port()))
    assert out.code == 0, out.err
    starts = [line.split("start service for ")[1].split(":")[0] for line in out.out.splitlines()
              if "> start service for " in line]
    assert starts == ["b", "a", "b"], out.out  # restarted on every switch of side, in the plan's order
    for line in out.out.splitlines():
        if "> start service for " in line:
            side = line.split("start service for ")[1][0]
            assert f" {side} serve " in line, line  # each start with its own side's argv


def test_a_stale_listener_on_the_port_is_refused_before_any_run(tmp_path):
    """Something already listens on the service port: refused naming the port, no run stored, ours never started."""
    port = free_port()
    stale = socket.socket()
    stale.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    stale.bind(("127.0.0.1", port))
    stale.listen()
    try:
        out = cli("run", service_spec(tmp_path, port), "--db", tmp_path / "r.db")
    finally:
        stale.close()
    assert out.code != 0 and "Traceback" not in out.err
    assert f"port {port} already accepts connections (a stale server?)" in out.err
    assert started(tmp_path) == []
    assert not (tmp_path / "r.db").exists() or [r for r in runs_of(tmp_path / "r.db") if r[3] == "ok"] == []


def test_a_service_that_exits_at_once_names_its_log(tmp_path):
    """The server exits 3 before listening: one line with the exit status and a log path that exists and holds
    its words."""
    port = free_port()
    out = cli("run", service_spec(tmp_path, port, mode="exit"), "--db", tmp_path / "r.db")
    assert out.code != 0 and "Traceback" not in out.err
    found = re.search(r"exited 3 before it was ready \(log: ([^)]+)\)", out.err)
    assert found, out.err
    assert "cannot bind: config error" in Path(found.group(1)).read_text()


def test_a_service_that_never_listens_times_out(tmp_path):
    """The server runs but never opens its port: refused after ready_timeout with the port named, then stopped."""
    port = free_port()
    start = time.monotonic()
    out = cli("run", service_spec(tmp_path, port, mode="deaf", ready=1), "--db", tmp_path / "r.db")
    assert time.monotonic() - start < 30
    assert out.code != 0 and f"did not accept connections on 127.0.0.1:{port} within 1 s" in out.err
    time.sleep(0.3)
    assert all(gone(pid) for _, pid in started(tmp_path))


def test_a_service_that_ignores_sigterm_is_still_stopped(tmp_path):
    """A server with SIGTERM ignored: after the session nothing of it runs and the port is free."""
    port = free_port()
    out = cli("run", service_spec(tmp_path, port, mode="stubborn"), "--db", tmp_path / "r.db")
    assert out.code == 0, out.err
    time.sleep(0.3)
    assert not listening(port) and all(gone(pid) for _, pid in started(tmp_path))


def test_a_setsid_grandchild_of_the_service_does_not_survive(tmp_path):
    """The server starts `setsid sleep` (a new session): stopping the service stops it too."""
    port = free_port()
    out = cli("run", service_spec(tmp_path, port, mode="orphan"), "--db", tmp_path / "r.db")
    assert out.code == 0, out.err
    pids = [pid for who, pid in started(tmp_path) if who == "child"]
    assert pids
    time.sleep(0.3)
    assert all(gone(pid) for pid in pids)


def test_a_service_killed_mid_session_fails_that_run_not_the_measurement(tmp_path):
    """The server is killed by someone during the session: the run in flight fails with the reason, later runs
    get a restarted server; no run is measured against a dead server."""
    port = free_port()
    flag = tmp_path / "killed"
    killer = write(tmp_path / "client.py", f"""
import os, signal, socket, sys
started = open({str(tmp_path / 'started')!r}).read().split()
if not os.path.exists({str(flag)!r}):
    open({str(flag)!r}, "w").close()
    os.kill(int(started[-1]), signal.SIGKILL)
    import time; time.sleep(0.3)
s = socket.create_connection(("127.0.0.1", {port}), timeout=5)
print("served_by_b:", 1 if s.recv(16) == b"b" else 0)
""")
    spec = service_spec(tmp_path, port, runs=3)
    text = spec.read_text()
    text = re.sub(r'argv = \["[^"]*", "-c", .*\n', f'argv = ["{sys.executable}", "{killer}"]\n', text, count=1)
    spec.write_text(text)
    out = cli("run", spec, "--db", tmp_path / "r.db")
    stored = [r for r in runs_of(tmp_path / "r.db") if not r[2]]
    failed = [r for r in stored if r[3] == "failed"]
    assert len(failed) == 1 and failed[0][4].startswith("the service exited before or during the run"), stored
    assert sum(r[3] == "ok" for r in stored) == 5
    assert "Traceback" not in out.err and not listening(port)


def test_service_cwd_that_does_not_exist(tmp_path):
    """service.cwd missing: refused by the command checks, before any service starts."""
    port = free_port()
    out = cli("run", service_spec(tmp_path, port, extra_service=f'cwd = "{tmp_path}/nowhere"\n'),
              "--db", tmp_path / "r.db")
    out.one_line_error(2, rf"service\.cwd '{tmp_path}/nowhere' is not a directory")
    assert started(tmp_path) == []
