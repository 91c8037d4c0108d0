"""Sides built from git commits, once, in a cache keyed by commit and build command."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess

import pytest

from core_helpers import cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("cc") is None,
                                reason="needs git and a C compiler (make test installs them)")

PROGRAM = """#include <stdio.h>
int main(void) {{ volatile unsigned long x = 0; for (unsigned long i = 0; i < {loops}UL; i++) x += i;
printf("loops: {loops}\\n"); return 0; }}
"""


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(repo)})


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "Makefile").write_text("prog: prog.c\n\tcc -O1 -o $(OUT)/prog prog.c\n")
    for loops, message in ((100000, "fast loop"), (3000000, "slow loop")):
        (r / "prog.c").write_text(PROGRAM.format(loops=loops))
        _git(r, "add", "-A")
        _git(r, "commit", "-q", "-m", message)
    return r


def _spec(repo, tmp_path, build='["make", "-C", "{src}", "OUT={build}"]', runs=2):
    spec = repo / "exp.toml"
    spec.write_text(f"""
[experiment]
name = "built"
runs = {runs}
warmup = 0
build = {build}

[[variant]]
name = "old"
git = "HEAD~1"

[[variant]]
name = "new"
git = "main"

[[workload]]
name = "prog"
argv = ["{{build}}/prog"]
parser = "keyvalue"
""")
    return spec


def test_sides_are_built_from_their_commits_and_the_hashes_stored(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path)
    db = tmp_path / "r.db"
    code, out, err = cli("run", str(spec), "--db", str(db), "--all")
    assert code == 0, err
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD", "HEAD~1"], capture_output=True,
                          text=True).stdout.split()
    assert f"new = main {head[0][:12]} (\"slow loop\")" in out and f"old = HEAD~1 {head[1][:12]} (\"fast loop\")" in out
    loops = next(line for line in out.splitlines() if line.startswith("loops"))
    assert "100,000" in loops and "3,000,000" in loops
    con = sqlite3.connect(db)
    sources = json.loads(con.execute("SELECT sources_json FROM sessions").fetchone()[0])
    con.close()
    assert sources["new"]["commit"] == head[0] and sources["old"]["commit"] == head[1]
    logs = sorted((tmp_path / ".perfab" / "cache").glob("*/build.log"))
    assert len(logs) == 2 and all("cc -O1" in p.read_text() for p in logs)
    # A second session reuses both builds: same cache entries, logs untouched.
    stamps = {p: p.stat().st_mtime_ns for p in logs}
    code, out, err = cli("run", str(spec), "--db", str(db), "--new-session", "--no-report")
    assert code == 0, err
    assert {p: p.stat().st_mtime_ns for p in logs} == stamps


def test_a_failed_build_is_one_line_with_its_log_and_stores_nothing(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path, build='["make", "-C", "{src}", "no-such-target"]')
    db = tmp_path / "r.db"
    code, out, err = cli("run", str(spec), "--db", str(db))
    last = err.splitlines()[-1]  # progress lines ("building old: ...") come before it
    assert code == 1 and out == "" and last.startswith("perfab: variant 'old': build `make -C"), err
    assert re.search(r"exited 2 \(make(\[\d+\])?: \*\*\* No rule to make target 'no-such-target'\.  Stop\.\)",
                     last) and "full log: " in last  # make[1] when run under make
    log = last.split("full log: ")[1].strip()
    assert "No rule to make target" in open(log).read()
    assert not db.exists() or sqlite3.connect(db).execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'sessions'").fetchone()[0] in (0, 1)
    code, listing, _ = cli("list", "--db", str(db))
    assert listing == ""


def test_plan_shows_the_build_steps_without_building(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path)
    code, out, err = cli("plan", str(spec))
    assert code == 0, err
    builds = [line for line in out.splitlines() if line.startswith("build")]
    assert len(builds) == 4 and "git HEAD~1 =" in builds[0] and "make -C" in builds[1]
    assert not (tmp_path / ".perfab" / "cache").exists()


def test_an_unknown_ref_is_a_usage_error(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path)
    spec.write_text(spec.read_text().replace('git = "HEAD~1"', 'git = "v9.9"'))
    code, _, err = cli("plan", str(spec))
    assert code == 2 and "git ref 'v9.9' names no commit" in err
