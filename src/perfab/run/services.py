"""Setup, teardown and services around a workload's runs.

Setup and teardown are shell commands; a failing setup stops the session
with its output, a failing teardown is reported but never loses data.  A
service is a server the workload talks to (e.g. nginx for ab), started as a
``ProcessTree`` (``proctree``) so that everything it forks, even in another
session, is stopped with it, always (SIGTERM, then SIGKILL).  Before it
starts, its port must be free: a stale server must never be measured in its
place.  It is waited for until it accepts TCP connections on 127.0.0.1;
``alive`` and ``cpu_times`` let the runner check it and charge its CPU time
to each run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from perfab.errors import PerfabError
from perfab.run.proctree import CpuTimes, ProcessTree
from perfab.run.trampoline import unusable_string


def run_shell(command: str, env: dict[str, str], cwd: str | None, what: str, timeout_s: float = 600) -> None:
    """Run one setup/teardown command; raise with its output when it fails."""
    why = "the command contains a NUL byte" if "\0" in command else unusable_string([], env, cwd)
    if why:
        raise PerfabError(f"{what} {command!r} cannot run: {why}; fix it")
    try:
        done = subprocess.run(["/bin/sh", "-c", command], env=env, cwd=cwd, capture_output=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise PerfabError(f"{what} `{command}` did not finish in {timeout_s:.0f} s; fix the command") from None
    except OSError as e:
        raise PerfabError(f"{what} `{command}` could not start ({e}); check cwd and /bin/sh") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise PerfabError(f"{what} `{command}` exited {done.returncode} ({tail[0]}); fix it and rerun "
                          "(stored runs are kept; continue with --resume)")


class Service:
    """A running server and all it forks; use as a context manager.

    ``log_dir`` is the directory the server's stdout and stderr go to, in
    ``service-<program>[-<port>].log`` (rewritten at each start, named by
    ``log``).  A failed start names that file in its message, so pass a
    directory that outlives the session (e.g. beside the store), never a
    temporary one.
    """

    def __init__(self, argv: list[str], port: int | None, ready_timeout_s: float, env: dict[str, str],
                 cwd: str | None, log_dir: Path):
        self.argv, self.port, self.ready_timeout_s = argv, port, ready_timeout_s
        self.env, self.cwd = env, cwd
        name = os.path.basename(argv[0]) if argv else "service"
        self.log = Path(log_dir) / f"service-{name}{'' if port is None else f'-{port}'}.log"
        self.tree: ProcessTree | None = None

    def __enter__(self) -> "Service":
        self._check()
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log, "wb")
        except OSError as e:
            raise PerfabError(f"cannot write the service log {self.log} ({e.strerror or e}); "
                              "check the log directory") from None
        with log:
            try:
                self.tree = ProcessTree(self.argv, self.env, self.cwd, log)
            except OSError as e:
                raise PerfabError(f"service {self.argv[0]!r} could not start ({e.strerror or e}); "
                                  "check workload.service.argv and cwd") from None
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def alive(self) -> bool:
        """Whether the server started here still runs."""
        return self.tree is not None and self.tree.alive()

    def cpu_times(self) -> CpuTimes:
        """User and system CPU seconds used so far by the server, its workers and the children they reaped."""
        return self.tree.cpu_times() if self.tree is not None else CpuTimes(0.0, 0.0)

    def run_ns(self) -> int:
        """Nanoseconds on a CPU of the server's live threads so far (scheduler accounting, exact)."""
        return self.tree.run_ns() if self.tree is not None else 0

    def io_counts(self) -> dict[str, int]:
        """Read and write system calls of the server's live processes so far."""
        return self.tree.io_counts() if self.tree is not None else {}

    def stop(self) -> None:
        """Stop the server and everything it started (SIGTERM, then SIGKILL after 5 s)."""
        if self.tree is not None:
            self.tree.kill(grace_s=5.0)

    def _check(self) -> None:
        """Refuse to start what could not run, or a server whose port another one already holds."""
        if not self.argv:
            raise PerfabError("workload.service.argv is empty; name the server to start")
        why = unusable_string(self.argv, self.env, self.cwd)
        if why:
            raise PerfabError(f"service {self.argv[0]!r} cannot start: {why}; fix workload.service")
        if os.sep not in self.argv[0] and shutil.which(self.argv[0], path=self.env.get("PATH", os.defpath)) is None:
            raise PerfabError(f"service {self.argv[0]!r} could not start (not found on PATH); "
                              "check workload.service.argv")
        if self.port is not None and _accepts(self.port):
            raise PerfabError(f"port {self.port} already accepts connections (a stale server?): "
                              "stop it or change workload.service.port")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if not self.tree.alive():
                raise PerfabError(f"service {self.argv[0]!r} exited {self.tree.returncode} before it was ready "
                                  f"(log: {self.log}); fix workload.service")
            if self.port is None or _accepts(self.port):
                return
            if time.monotonic() > deadline:
                raise PerfabError(f"service {self.argv[0]!r} did not accept connections on 127.0.0.1:{self.port} "
                                  f"within {self.ready_timeout_s:g} s; check the port or raise ready_timeout")
            time.sleep(0.05)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
