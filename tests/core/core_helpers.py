"""Shared helpers for the pipeline-spine tests: specs, the CLI in-process, fake runs (imported by name)."""

from __future__ import annotations

import io
import socket
import sqlite3
import textwrap
from pathlib import Path

from perfab.cli import main
from perfab.run.backends import TimeBackend
from perfab.run.executor import FakeExecutor, FakeOutcome
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Store

REPO = Path(__file__).resolve().parents[2]

# A fixed machine snapshot, so reports do not depend on the machine running the tests.
FIXED_ENV = {
    "cpu.model": "Test CPU 3000",
    "cpu.sockets": "1",
    "cpu.cores": "4",
    "cpu.threads": "8",
    "kernel.release": "6.1.0-test",
    "cpufreq.governor": "performance",
    "cpufreq.boost": "0",
    "cpu.smt": "on",
}


def spec_text(body: str) -> str:
    return textwrap.dedent(body).lstrip()


def two_sides(extra_experiment: str = "", workload: str = 'argv = ["sleep", "0.01"]', variants: str = "",
              runs: int = 4, warmup: int = 1, name: str = "t") -> str:
    """A small valid spec with sides a (baseline) and b."""
    variants = variants or '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n'
    return (f'[experiment]\nname = "{name}"\nruns = {runs}\nwarmup = {warmup}\n{extra_experiment}\n\n'
            f'{variants}\n[[workload]]\nname = "w"\n{workload}\n')


def cli(*argv: str) -> tuple[int, str, str]:
    """Run ``perfab`` in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def fake_runner(text: str, db: Path, behaviour=None, env: dict | None = None, path: str = "spec.toml"):
    """A Runner over a FakeExecutor; returns (runner, executor, store)."""
    exp = parse_spec(text, path)
    store = Store(db)
    ex = FakeExecutor(behaviour) if behaviour else FakeExecutor()
    return Runner(exp, store, TimeBackend(), ex, dict(env or FIXED_ENV)), ex, store


def runs_table(db: Path) -> list[tuple]:
    """(seq, variant, warmup, status, reason) of every stored run (every attempt), read-only."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT p.seq, p.variant, p.warmup, r.status, r.reason FROM runs r "
                           "JOIN planned_runs p ON p.id = r.planned_id "
                           "ORDER BY p.session_id, p.seq, r.attempt").fetchall()
    finally:
        con.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_refuses(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


__all__ = ["FakeOutcome", "FIXED_ENV", "REPO", "cli", "fake_runner", "free_port", "port_refuses", "runs_table",
           "spec_text", "two_sides"]
