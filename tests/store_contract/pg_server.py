"""A real, throwaway PostgreSQL server for the tests: initdb in a temp dir, a Unix socket there, always stopped.

PostgreSQL refuses to run as root; as root the server runs as the
``postgres`` user the Debian package creates.  ``PgServer.start()`` raises
``Unavailable`` with the reason when no server can be had here (the
tests then skip, naming it).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path


class Unavailable(Exception):
    """No PostgreSQL server can be started on this machine; the message says why."""


def _binaries() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not versions:
        raise Unavailable("PostgreSQL's initdb is not installed (make sysdeps installs Debian's postgresql)")
    return Path(versions[-1]).parent


class PgServer:
    """One PostgreSQL server listening only on a Unix socket in its own temp dir."""

    def __init__(self) -> None:
        self.bin = _binaries()
        self.dir = Path(tempfile.mkdtemp(prefix="perfab-pg-"))  # short: a socket path has ~100 bytes
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.user: int | None = None
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres").pw_uid
            except KeyError:
                shutil.rmtree(self.dir, ignore_errors=True)
                raise Unavailable("PostgreSQL will not run as root and there is no 'postgres' user") from None
            os.chown(self.dir, self.user, -1)

    def _run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, user=self.user,
                              stdin=subprocess.DEVNULL)

    def start(self) -> "PgServer":
        try:
            made = self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "perfab", "--auth=trust",
                             "-E", "UTF8", "--no-locale", "--no-sync")
            if made.returncode != 0:
                raise Unavailable(f"initdb failed: {made.stderr.strip().splitlines()[-1:]}")
            options = f"-k {self.dir} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
            up = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options,
                           "-w", "-t", "60", "start")
            if up.returncode != 0:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
                raise Unavailable(f"the server did not start: {tail or up.stderr.strip()}")
        except BaseException:
            self.stop()
            raise
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://perfab@/{database}?host={self.dir}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (immediately) and remove its files; safe to call twice."""
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)
