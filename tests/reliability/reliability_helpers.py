"""The harness of the reliability corpus: a hostile situation, perfab's exact answer, the store intact.

Every case in ``test_rel_*.py`` states one situation a user or a machine can
create and the one outcome perfab owes it: a usage error (one line, exit 2,
naming the cause), another one-line error with its code, or a run stored as
failed with its reason; and in every case no traceback and no stored run
changed or lost.  Helpers here are imported by name.
"""

from __future__ import annotations

import hashlib
import io
import re
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from perfab.cli import main

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    def one_line_error(self, code: int, pattern: str) -> "Outcome":
        """Assert exit ``code`` and exactly one stderr line ``perfab: ...`` matching ``pattern``."""
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert self.code == code, f"exit {self.code}, expected {code}; stderr:\n{self.err}"
        assert "Traceback" not in self.err, self.err
        assert len(lines) == 1, f"expected one line on stderr, got:\n{self.err}"
        assert lines[0].startswith(("perfab: ", "perfab size: ")), lines[0]
        assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
        return self


def cli(*argv: str, cwd: Path | None = None) -> Outcome:
    """``perfab ARGV`` in-process (an escaping exception fails the test as the traceback it would be)."""
    import os

    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        code = main([str(a) for a in argv], out, err)
    finally:
        os.chdir(old)
    return Outcome(code, out.getvalue(), err.getvalue())


def cli_process(*argv: str, cwd: Path | None = None, timeout: float = 120, stdin: bytes | None = None) -> Outcome:
    """``perfab ARGV`` as its own process, the way a shell runs it."""
    import os

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    p = subprocess.run([sys.executable, "-c", "from perfab.cli import main_entry; main_entry()", *map(str, argv)],
                       cwd=cwd, env=env, capture_output=True, timeout=timeout, input=stdin)
    return Outcome(p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))


def spec(body: str) -> str:
    return textwrap.dedent(body).lstrip()


def two_sides(workload: str = 'argv = ["true"]', experiment: str = "", variants: str = "",
              runs: int = 2, warmup: int = 0, name: str = "rel", extra: str = "") -> str:
    """A small valid spec with sides a (baseline) and b, one workload ``w``."""
    variants = variants or '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n'
    return (f'[experiment]\nname = "{name}"\nruns = {runs}\nwarmup = {warmup}\n{experiment}\n\n'
            f'{variants}\n[[workload]]\nname = "w"\n{workload}\n{extra}')


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def file_digest(path: Path) -> str:
    """The bytes of a database file and its WAL, so 'unchanged' means unchanged on disk."""
    h = hashlib.sha256()
    for p in (path, Path(f"{path}-wal")):
        h.update(p.read_bytes() if p.exists() else b"<absent>")
    return h.hexdigest()


def stored_rows(db: Path) -> list[tuple]:
    """Every stored run (every attempt), with its measurements, read-only: what must never change."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        runs = con.execute("SELECT r.id, p.session_id, p.seq, p.variant, p.warmup, r.attempt, r.status, r.reason "
                           "FROM runs r JOIN planned_runs p ON p.id = r.planned_id ORDER BY r.id").fetchall()
        samples = con.execute("SELECT * FROM samples ORDER BY 1, 2").fetchall()
        return runs + samples
    finally:
        con.close()


def runs_of(db: Path) -> list[tuple]:
    """(seq, variant, warmup, status, reason) of every stored attempt."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT p.seq, p.variant, p.warmup, r.status, r.reason FROM runs r "
                           "JOIN planned_runs p ON p.id = r.planned_id ORDER BY p.session_id, p.seq, r.attempt"
                           ).fetchall()
    finally:
        con.close()


def sessions_of(db: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT id, status FROM sessions ORDER BY id").fetchall()
    finally:
        con.close()


def stored_db(tmp: Path, runs: int = 2) -> Path:
    """A database holding one finished two-sided session of ``true``."""
    db = tmp / "kept.db"
    s = write(tmp / "kept.toml", two_sides(runs=runs, name="kept"))
    out = cli("run", s, "--db", db, "--no-report")
    assert out.code == 0, out.err
    return db


def script(path: Path, body: str) -> Path:
    """An executable shell script."""
    write(path, "#!/bin/sh\n" + textwrap.dedent(body).lstrip())
    path.chmod(0o755)
    return path
