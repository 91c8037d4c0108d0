"""A workload's service (a real HTTP server) is up during the runs and stopped afterwards, always."""

from __future__ import annotations

import os
import sys

import pytest

from core_helpers import free_port, port_refuses, runs_table, two_sides
from perfab.errors import PerfabError
from perfab.run.backends import TimeBackend
from perfab.run.executor import RealExecutor
from perfab.run.runner import Runner
from perfab.run.services import run_shell
from perfab.spec import parse_spec
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
