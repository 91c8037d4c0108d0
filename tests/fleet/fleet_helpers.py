"""A fleet on one machine: a real PostgreSQL server, real worker processes standing in for lab machines.

Workers are ``perfab worker`` processes told apart by ``--machine``; they
run a tiny deterministic C program under cachegrind, so the counts (and
so the reports) of the same runs are the same wherever they ran.  Every
process started here is killed at teardown, and the server stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store_contract"))
from pg_server import PgServer, Unavailable  # noqa: E402

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
static unsigned table[4096];
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000;
	unsigned x = 12345;
	for (long i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		table[x % 4096] += x;
	}
	printf("sum %u\n", table[7] ^ table[4095]);
	return 0;
}
"""


def spec(name: str, n: int, runs: int = 1) -> str:
    """Unoptimised against optimised builds of the program, n iterations, under fixed simulated caches."""
    return (f'[experiment]\nname = "{name}"\nruns = {runs}\nwarmup = 0\nperturb_seed = 7\n\n'
            '[measure]\nbackend = "cachegrind"\nl1i = "32K,8,64"\nl1d = "32K,8,64"\nll = "1M,16,64"\n\n'
            '[[variant]]\nname = "O0"\n\n[[variant]]\nname = "O2"\n\n'
            f'[[workload]]\nname = "loop"\nargv = ["./build/{{variant}}/prog", "{n}"]\ntimeout = 120\n')


@pytest.fixture(scope="module")
def server():
    try:
        pg = PgServer().start()
    except Unavailable as e:
        pytest.skip(f"no PostgreSQL server here: {e}")
    yield pg
    pg.stop()


@pytest.fixture
def lab(tmp_path, server):
    """A working directory with the program built both ways, a fresh database, and a way to start processes."""
    if not _have("valgrind") or not _have("gcc"):
        pytest.skip("valgrind and gcc are needed (make sysdeps installs them)")
    (tmp_path / "prog.c").write_text(PROGRAM)
    for opt in ("O0", "O2"):
        (tmp_path / "build" / opt).mkdir(parents=True)
        subprocess.run(["gcc", f"-{opt}", "-o", f"build/{opt}/prog", "prog.c"], cwd=tmp_path, check=True)
    lab = Lab(tmp_path, server.new_database())
    yield lab
    lab.kill_all()


class Lab:
    """The fleet under test: its directory, its database URL, the processes it started."""

    def __init__(self, root: Path, url: str):
        self.root, self.url = root, url
        self.procs: list[subprocess.Popen] = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}  # the same for every run

    def write_spec(self, name: str, n: int, runs: int = 1) -> str:
        path = self.root / f"{name}.toml"
        path.write_text(spec(name, n, runs))
        return path.name

    def perfab(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "perfab.cli", *argv], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def worker(self, machine: str, stall_after: float = 2.0) -> "Worker":
        log = self.root / f"worker-{machine}-{len(self.procs)}.log"
        argv = [sys.executable, "-m", "perfab.cli", "worker", "--db", self.url, "--machine-class", "vm",
                "--machine", machine, "--stall-after", str(stall_after)]
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, cwd=self.root, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return Worker(proc, log)

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.url) as conn:
            return conn.execute(sql, params).fetchall()

    def wait(self, what: str, check, timeout: float = 60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = check()
            if got:
                return got
            time.sleep(0.1)
        logs = "\n".join(p.read_text() for p in sorted(self.root.glob("worker-*.log")))
        raise AssertionError(f"timed out waiting for {what}; worker logs:\n{logs}")

    def jobs(self) -> dict[str, tuple[str, str]]:
        """experiment -> (status, queue) of every job."""
        rows = self.query("SELECT args->>'experiment', status, queue_name FROM procrastinate_jobs")
        return {e: (s, q) for e, s, q in rows}

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


class Worker:
    """One worker process and its log."""

    def __init__(self, proc: subprocess.Popen, log: Path):
        self.proc, self.log = proc, log

    def text(self) -> str:
        return self.log.read_text()

    def ready(self) -> bool:
        return "serving class vm" in self.text()

    def stop(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def _have(tool: str) -> bool:
    from shutil import which

    return which(tool) is not None
