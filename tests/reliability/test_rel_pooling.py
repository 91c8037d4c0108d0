"""Sessions pooled across different builds, programs, specs or machines: each difference is a warning.

A database where side b's program was rewritten between two sessions gave
a confident delta with no word that two programs were pooled.  Each case
runs real sessions, changes one thing between them, and reads the report:
the warning names the side, the thing that differs and the sessions on
each side of it; with nothing changed there is no such warning.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from reliability_helpers import cli, script, two_sides, write

VARIANTS = '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n'


def side_programs(tmp_path: Path) -> Path:
    """One program per side, ``./a.sh`` and ``./b.sh``, each printing a keyvalue metric."""
    for side in ("a", "b"):
        script(tmp_path / f"{side}.sh", "echo 'ops: 100'\n")
    return write(tmp_path / "s.toml", two_sides(workload='argv = ["./{variant}.sh"]\nparams = {}\n'
                                                         'parser = "keyvalue"', runs=3, name="pool"))


def session(tmp_path: Path, db: Path, new: bool = True) -> None:
    argv = ["run", "s.toml", "--db", db, "--no-report"] + (["--new-session"] if new else [])
    out = cli(*argv, cwd=tmp_path)
    assert out.code == 0, out.err


def report(tmp_path: Path, db: Path, fmt: str = "text") -> str:
    out = cli("report", "--db", db, "--format", fmt, cwd=tmp_path)
    assert out.code == 0, out.err
    return out.out


def test_a_program_changed_between_sessions_is_named(tmp_path):
    spec = side_programs(tmp_path)
    db = tmp_path / "r.db"
    session(tmp_path, db)
    script(tmp_path / "b.sh", "echo 'ops: 50'\n")
    session(tmp_path, db)
    text = report(tmp_path, db)
    b = (tmp_path / "b.sh").resolve()
    line = next(x for x in text.splitlines() if "changed between pooled sessions" in x)
    assert f"side 'b': {b} changed between pooled sessions (" in " ".join(text.split())
    assert "in session 1;" in " ".join(text.split()) and "in session 2)" in " ".join(text.split())
    assert "side 'a'" not in line and spec.exists()


def test_the_warning_is_data_in_json(tmp_path):
    side_programs(tmp_path)
    db = tmp_path / "r.db"
    session(tmp_path, db)
    script(tmp_path / "b.sh", "echo 'ops: 50'\n")
    session(tmp_path, db)
    doc = json.loads(report(tmp_path, db, "json"))
    (pooled,) = [w for w in doc["warnings"] if w["kind"] == "pooled"]
    assert "changed between pooled sessions" in pooled["text"], doc["warnings"]
    assert pooled["data"] == {"side": "b", "differs": "program", "program": str((tmp_path / "b.sh").resolve()),
                              "versions": 2}


def test_nothing_changed_means_no_pooling_warning(tmp_path):
    side_programs(tmp_path)
    db = tmp_path / "r.db"
    session(tmp_path, db)
    session(tmp_path, db)
    text = report(tmp_path, db)
    assert "pooled" not in text and "sessions : 2" in text


def test_the_programs_are_stored_with_the_session(tmp_path):
    side_programs(tmp_path)
    db = tmp_path / "r.db"
    session(tmp_path, db)
    con = sqlite3.connect(db)
    sources = json.loads(con.execute("SELECT sources_json FROM sessions").fetchone()[0])
    con.close()
    import hashlib

    for side in ("a", "b"):
        path = str((tmp_path / f"{side}.sh").resolve())
        assert sources[side]["programs"] == {path: hashlib.sha256((tmp_path / f"{side}.sh").read_bytes()).hexdigest()}


def test_a_spec_changed_between_sessions_is_named(tmp_path):
    spec = side_programs(tmp_path)
    db = tmp_path / "r.db"
    session(tmp_path, db)
    spec.write_text(spec.read_text().replace("runs = 3", "runs = 4"))
    session(tmp_path, db)
    flat = " ".join(report(tmp_path, db).split())
    assert ("the spec differs between pooled sessions (version 1 in session 1; version 2 in session 2); runs "
            "under different specs are compared as one") in flat


def test_sessions_from_two_machines_are_named(tmp_path):
    side_programs(tmp_path)
    db = tmp_path / "r.db"
    session(tmp_path, db)
    session(tmp_path, db)
    con = sqlite3.connect(db)
    con.execute("UPDATE sessions SET host = 'lab-7' WHERE id = 2")
    con.commit()
    con.close()
    flat = " ".join(report(tmp_path, db).split())
    assert "side 'a': sessions from different machines are pooled (" in flat and "lab-7 in session 2)" in flat


def git(repo: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture
def repo(tmp_path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    write(r / "prog.sh", "#!/bin/sh\necho 'ops: 100'\n").chmod(0o755)
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "one")
    return r


def test_sessions_of_two_builds_are_named(tmp_path, repo):
    """Side a built from `main`, which moved between sessions: the two content hashes are named."""
    write(tmp_path / "s.toml", f"""[experiment]
name = "built"
runs = 3
warmup = 0
repo = "{repo}"

[[variant]]
name = "a"
git = "main"
build = ["cp", "{{src}}/prog.sh", "{{build}}/prog"]

[[variant]]
name = "b"
git = "main"
build = ["cp", "{{src}}/prog.sh", "{{build}}/prog"]

[[workload]]
name = "w"
argv = ["{{build}}/prog"]
parser = "keyvalue"
""")
    db = tmp_path / "r.db"
    session(tmp_path, db)
    write(repo / "prog.sh", "#!/bin/sh\necho 'ops: 50'\n")
    git(repo, "commit", "-q", "-am", "two")
    session(tmp_path, db)
    flat = " ".join(report(tmp_path, db).split())
    assert "side 'a': sessions of different builds are pooled (" in flat
    assert "in session 1;" in flat
    assert "in session 2); a delta over them mixes builds: use one database per build" in flat
