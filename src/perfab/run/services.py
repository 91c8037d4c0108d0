"""Setup, teardown and services around a workload's runs.

Setup and teardown are shell commands; a failing setup stops the session
with its output, a failing teardown is reported but never loses data.  A
service is a server the workload talks to (e.g. nginx for ab): started in
its own process group, waited for until it accepts TCP connections on
127.0.0.1, and stopped by pid afterwards, always (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from perfab.errors import PerfabError
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
    """A running server; use as a context manager."""

    def __init__(self, argv: list[str], port: int | None, ready_timeout_s: float, env: dict[str, str],
                 cwd: str | None, log: Path):
        self.argv, self.port, self.ready_timeout_s = argv, port, ready_timeout_s
        self.env, self.cwd, self.log = env, cwd, log
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Service":
        with open(self.log, "wb") as log:
            try:
                self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             env=self.env, cwd=self.cwd, start_new_session=True)
            except OSError as e:
                raise PerfabError(f"service {self.argv[0]!r} could not start ({e.strerror or e}); "
                                  "check workload.service.argv") from None
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise PerfabError(f"service {self.argv[0]!r} exited {self.proc.returncode} before it was ready "
                                  f"(log: {self.log}); fix workload.service")
            if self.port is None or _accepts(self.port):
                return
            if time.monotonic() > deadline:
                raise PerfabError(f"service {self.argv[0]!r} did not accept connections on 127.0.0.1:{self.port} "
                                  f"within {self.ready_timeout_s:.0f} s; check the port or raise ready_timeout")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        pgid = self.proc.pid
        for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(pgid, signal.SIGKILL)  # anything the server forked
        except ProcessLookupError:
            pass


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
