"""Hostile services: a `[workload.service]` that finds its port taken, dies, stays deaf, hides or refuses to stop.

Every server here is a small Python program on 127.0.0.1 at a free port,
started by perfab once per side with that side's ``{variant}``; it records
``side<TAB>pid`` in a file as it starts, so each case can check which
servers ran and that none of them (nor anything they spawned) is left
running afterwards.  The outcome asserted is the exact one: the one-line
error with its exit status, or the stored runs with their status and reason.
"""

from __future__ import annotations

import re
import socket
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from reliability_helpers import cli, runs_of, sessions_of, two_sides, write

PY = sys.executable

SERVER = r'''
import os, signal, socket, subprocess, sys, time
port, side, mode, record = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
marker = record + ".started-once"
with open(record, "a") as f:
    f.write(f"{side}\t{os.getpid()}\n")
if mode == "exit":
    print(f"fatal: cannot load config for {side}", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "deaf":
    time.sleep(300)
    sys.exit(0)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "hide":
    # The listener is a grandchild in a session of its own; this process only waits.
    child = subprocess.Popen(["setsid", sys.executable, sys.argv[0], str(port), side, "serve", record])
    with open(record, "a") as f:
        f.write(f"grandchild\t{child.pid}\n")
    child.wait()
    sys.exit(0)
if mode == "fragile":
    # The first server answers one client and dies at the next; every later start fails at once.
    if os.path.exists(marker):
        print("fatal: state directory is corrupt", file=sys.stderr, flush=True)
        sys.exit(4)
    open(marker, "w").close()
if mode == "once":
    pass
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
served = 0
while True:
    c, _ = s.accept()
    if mode in ("once", "fragile") and served == 2:
        os._exit(5)  # perfab's readiness probe was the first connection, one client the second
    c.sendall(side.encode())
    c.close()
    served += 1
'''

# The workload: asks the server which side it is and says whether that is its own side.
CLIENT = r'''
import os, socket, sys, time
port, side = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
got = b""
while chunk := s.recv(256):
    got += chunk
if not got:
    # The server died on this connection: wait until the process perfab started for it has ended too.
    record = sys.argv[3]
    pid = int(open(record).read().splitlines()[-1].split("\t")[1])
    root = pid
    try:
        parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        if open(f"/proc/{parent}/comm").read().startswith("perfab-exec"):
            root = parent
    except (OSError, IndexError, ValueError):
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{root}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state in ("Z", "X"):
            break
        time.sleep(0.01)
print("own_side:", 1 if got.decode() == side else 0)
'''


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
    """The process no longer exists (or is a zombie nobody can signal into doing anything)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def all_gone(pids: list[int], wait_s: float = 3.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return all(gone(p) for p in pids)


def started(tmp: Path) -> list[tuple[str, int]]:
    """(side, pid) of every server start, and ("grandchild", pid) of every process a server spawned."""
    path = tmp / "started"
    if not path.exists():
        return []
    return [(who, int(pid)) for who, pid in (line.split("\t") for line in path.read_text().splitlines())]


def service_spec(tmp: Path, port: int, mode: str = "serve", runs: int = 2, ready: float = 10,
                 experiment: str = "", variants: str = "", service_extra: str = "") -> Path:
    server = write(tmp / "server.py", SERVER)
    client = write(tmp / "client.py", CLIENT)
    workload = (f'argv = ["{PY}", "{client}", "{port}", "{{variant}}", "{tmp}/started"]\n'
                'parser = "keyvalue"\n'
                'parser_options = {higher_is_better = {own_side = true}}')
    service = (f'\n[workload.service]\n'
               f'argv = ["{PY}", "{server}", "{port}", "{{variant}}", "{mode}", "{tmp}/started"]\n'
               f'port = {port}\nready_timeout = {ready}\nlog = "{tmp}/logs"\n{service_extra}')
    return write(tmp / "svc.toml", two_sides(workload=workload, runs=runs, extra=service, variants=variants,
                                             experiment="max_failures = 20\n" + experiment))


def own_side_values(db: Path) -> list[tuple[str, str, float]]:
    """(variant, status, own_side) of every measured run that has the metric."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT p.variant, r.status, s.value FROM runs r JOIN planned_runs p ON p.id = r.planned_id "
                           "JOIN samples s ON s.run_id = r.id WHERE s.metric = 'own_side' AND p.warmup = 0 "
                           "ORDER BY p.seq").fetchall()
    finally:
        con.close()


@pytest.fixture
def stale(request):
    """A listener that holds a free port and accepts connections (someone else's forgotten server)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("command", ["run", "plan"], ids=["run-refused", "plan-does-not-probe"])
def test_stale_listener_on_the_port(tmp_path, stale, command):
    """A port that already accepts connections: `run` refuses in one line naming the port before any run is
    stored or any server started; `plan` starts nothing and so does not probe it."""
    spec = service_spec(tmp_path, stale)
    db = tmp_path / "r.db"
    out = cli(command, spec, "--db", db) if command == "run" else cli("plan", spec)
    if command == "plan":
        assert out.code == 0 and "Traceback" not in out.err, out.err
        assert started(tmp_path) == []
        return
    out.one_line_error(1, rf"^perfab: port {stale} already accepts connections \(a stale server\?\): "
                          r"stop it or change workload\.service\.port$")
    assert started(tmp_path) == []
    assert not db.exists() or runs_of(db) == []
    assert listening(stale)  # the stale listener is not ours to stop


def test_service_that_exits_at_once_names_its_log(tmp_path):
    """The server exits 3 before it listens: one line with the exit status and its log, which exists and holds
    what the server printed; no run is stored."""
    port = free_port()
    db = tmp_path / "r.db"
    out = cli("run", service_spec(tmp_path, port, mode="exit"), "--db", db)
    out.one_line_error(1, r"^perfab: service '.+python[0-9.]*' exited 3 before it was ready "
                          r"\(log: [^)]+\); fix workload\.service$")
    log = Path(re.search(r"\(log: ([^)]+)\)", out.err).group(1))
    assert log.is_file() and log.is_relative_to(tmp_path / "logs")
    first = started(tmp_path)[0][0]
    assert log.read_text() == f"fatal: cannot load config for {first}\n"
    assert [who for who, _ in started(tmp_path)] == [first]  # stopped at the first start
    assert not db.exists() or runs_of(db) == []


def test_service_that_never_opens_its_port_times_out(tmp_path):
    """The server runs but never listens: after ready_timeout one line names the address and the key to raise,
    and the deaf server is stopped."""
    port = free_port()
    begin = time.monotonic()
    out = cli("run", service_spec(tmp_path, port, mode="deaf", ready=1.5), "--db", tmp_path / "r.db")
    elapsed = time.monotonic() - begin
    out.one_line_error(1, rf"^perfab: service '.+' did not accept connections on 127\.0\.0\.1:{port} within 1\.5 s; "
                          r"check the port or raise ready_timeout$")
    assert 1.5 <= elapsed < 20
    pids = [pid for _, pid in started(tmp_path)]
    assert len(pids) == 1 and all_gone(pids)
    assert not listening(port)


def test_service_dying_mid_session_fails_that_run_and_restarts(tmp_path):
    """Sequential sides, the server dies at its second client: that run fails with the reason and the log,
    the next run gets a fresh server and is measured; no run is measured against a dead server."""
    port = free_port()
    spec = service_spec(tmp_path, port, mode="once", runs=3, experiment='order = "sequential"')
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db, "--no-report")
    assert "Traceback" not in out.err, out.err
    stored = [(variant, status, reason) for _, variant, warmup, status, reason in runs_of(db) if not warmup]
    by_side = {side: [(s, r) for v, s, r in stored if v == side] for side in ("a", "b")}
    for side, got in by_side.items():
        assert [s for s, _ in got] == ["ok", "failed", "ok"], stored
        reason = got[1][1]
        assert re.fullmatch(r"the service exited before or during the run \(log: [^)]+\)", reason), reason
        assert Path(re.search(r"\(log: ([^)]+)\)", reason).group(1)).is_file()
    assert out.code == 0, out.err  # two failures are within max_failures: the session finishes
    assert [re.sub(r" \(log: [^)]+\)$", "", line) for line in out.err.splitlines()] == [
        "perfab: run 1 (w, a) failed: the service exited before or during the run",
        "perfab: run 4 (w, b) failed: the service exited before or during the run"], out.err
    assert sessions_of(db) == [(1, "finished")]
    assert [v for v, _, own in own_side_values(db)] == ["a", "a", "b", "b"]
    assert all(own == 1.0 for _, _, own in own_side_values(db))
    assert sorted(who for who, _ in started(tmp_path)) == ["a", "a", "b", "b"]
    assert all_gone([pid for _, pid in started(tmp_path)]) and not listening(port)


def test_service_that_cannot_come_back_stops_the_session_keeping_its_runs(tmp_path):
    """The server dies mid-session and every restart exits at once: the run it died in fails with the reason,
    the restart's failure ends the session in one line naming its log, and the runs already stored stay."""
    port = free_port()
    spec = service_spec(tmp_path, port, mode="fragile", runs=3, experiment='order = "sequential"')
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db, "--no-report")
    assert out.code == 1 and "Traceback" not in out.err, out.err
    lines = out.err.splitlines()
    assert len(lines) == 2, out.err
    assert re.fullmatch(r"perfab: run 1 \(w, a\) failed: the service exited before or during the run "
                        r"\(log: [^)]+\)", lines[0]), lines[0]
    assert re.fullmatch(r"perfab: service '.+' exited 4 before it was ready \(log: [^)]+\); fix workload\.service",
                        lines[1]), lines[1]
    log = Path(re.search(r"\(log: ([^)]+)\)", lines[1]).group(1))
    assert log.read_text() == "fatal: state directory is corrupt\n"
    stored = [(status, reason) for _, _, warmup, status, reason in runs_of(db) if not warmup]
    assert [s for s, _ in stored] == ["ok", "failed"], stored
    assert stored[1][1].startswith("the service exited before or during the run (log: ")
    assert sessions_of(db)[0][1] != "finished"
    assert all_gone([pid for _, pid in started(tmp_path)]) and not listening(port)


VARIANTS = ('[[variant]]\nname = "base v1.0"\n\n[[variant]]\nname = "new+lto"\n')


def test_variant_placeholder_gives_each_side_its_own_server(tmp_path):
    """`{variant}` in the service argv (names with a space, '.' and '+'): each side's server starts with its own
    name, and every run of a side is answered by that side's server."""
    port = free_port()
    spec = service_spec(tmp_path, port, runs=2, variants=VARIANTS)
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db, "--no-report")
    assert out.code == 0, out.err
    starts = [who for who, _ in started(tmp_path)]
    assert set(starts) == {"base v1.0", "new+lto"}, starts
    assert len(starts) >= 2
    values = own_side_values(db)
    assert sorted(v for v, _, _ in values) == ["base v1.0", "base v1.0", "new+lto", "new+lto"]
    assert all(status == "ok" and own == 1.0 for _, status, own in values), values
    logs = sorted(p.parent.name.rsplit("-", 3)[0] for p in (tmp_path / "logs").rglob("*.log"))
    assert set(logs) == {"w-base_v1.0", "w-new+lto"}, logs  # one log directory per start, named by side
    assert all_gone([pid for _, pid in started(tmp_path)]) and not listening(port)


def test_setsid_grandchild_holding_the_port_is_stopped(tmp_path):
    """The service spawns the real listener with `setsid` (a session of its own) and only waits: after the
    session the grandchild is gone and nothing listens on the port."""
    port = free_port()
    out = cli("run", service_spec(tmp_path, port, mode="hide"), "--db", tmp_path / "r.db", "--no-report")
    assert out.code == 0, out.err
    grandchildren = [pid for who, pid in started(tmp_path) if who == "grandchild"]
    assert grandchildren, started(tmp_path)
    assert all_gone([pid for _, pid in started(tmp_path)]), started(tmp_path)
    assert not listening(port)
    assert [r[3] for r in runs_of(tmp_path / "r.db")] == ["ok"] * 4


def test_service_that_ignores_sigterm_is_still_stopped(tmp_path):
    """A server with SIGTERM ignored is killed after the grace: every start of it is gone and the port is free,
    and the session finishes with every run measured."""
    port = free_port()
    spec = service_spec(tmp_path, port, mode="stubborn", runs=1, experiment='order = "sequential"')
    out = cli("run", spec, "--db", tmp_path / "r.db", "--no-report")
    assert out.code == 0, out.err
    pids = [pid for _, pid in started(tmp_path)]
    assert len(pids) == 2
    assert all_gone(pids) and not listening(port)
    assert [r[3] for r in runs_of(tmp_path / "r.db")] == ["ok", "ok"]


def test_service_program_not_on_path(tmp_path):
    """A service program that does not exist: refused in one line naming it, before any run."""
    port = free_port()
    spec = service_spec(tmp_path, port)
    text = spec.read_text().replace(f'argv = ["{PY}", "{tmp_path}/server.py"', 'argv = ["no-such-server-xyz"', 1)
    spec.write_text(text)
    db = tmp_path / "r.db"
    out = cli("run", spec, "--db", db)
    out.one_line_error(2, r"no-such-server-xyz")
    assert not db.exists() or runs_of(db) == []


def test_service_log_directory_is_a_file(tmp_path):
    """`log` names a regular file: the first start is refused in one line naming the log path, nothing runs."""
    port = free_port()
    write(tmp_path / "logs", "not a directory\n")
    db = tmp_path / "r.db"
    out = cli("run", service_spec(tmp_path, port), "--db", db)
    out.one_line_error(1, rf"cannot write the service log {re.escape(str(tmp_path))}/logs/\S+ \(.+\); "
                          r"check the log directory$")
    assert started(tmp_path) == []
    assert not db.exists() or runs_of(db) == []
