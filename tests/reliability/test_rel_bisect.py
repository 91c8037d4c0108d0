"""perfab bisect over a merge, over commits that cannot be built, and over a sweep: the commit git would name.

Real repositories, real builds and cachegrind's instruction counts (exact,
so each decision is deterministic).  A regression brought in by a merged
branch is traced into that branch (the merge is not named), and the
output says the search walked into it; an unbuildable candidate is skipped
as ``git bisect skip`` does, and when only skipped commits separate the
last good from the first bad the range is named; a sweep spec's metric is
found at its points.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reliability_helpers import cli, write

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("cc") is None
                                or shutil.which("valgrind") is None, reason="needs git, cc and valgrind")

PROGRAM = """#include <stdio.h>
#include <stdlib.h>
#include "work.h"
int main(int argc, char **argv) {
    unsigned long scale = argc > 1 ? strtoul(argv[1], 0, 10) : 1;
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < LOOPS * scale; i++) x += i * 3;
    printf("loops: %lu\\n", (unsigned long)(LOOPS * scale));
    return 0;
}
"""
MAKEFILE = "$(OUT)/prog: prog.c work.h\n\tcc -O1 -o $(OUT)/prog prog.c\n"


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def new_repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    write(r / "prog.c", PROGRAM)
    write(r / "Makefile", MAKEFILE)
    write(r / "work.h", "#define LOOPS 20000UL\n")
    write(r / "CHANGES", "start\n")
    git(r, "add", "-A")
    git(r, "commit", "-q", "-m", "good: the starting point")
    return r


def change(repo: Path, message: str, slower: bool = False, makefile: str | None = None, log: str = "CHANGES") -> str:
    """A commit appending ``message`` to ``log`` (another file per branch: merges without conflicts)."""
    with open(repo / log, "a") as f:
        f.write(message + "\n")
    if slower:
        write(repo / "work.h", "#define LOOPS 28000UL\n")
    if makefile is not None:
        write(repo / "Makefile", makefile)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def spec(tmp_path: Path, repo: Path, params: str = "") -> Path:
    argv = '["{build}/prog", "{scale}"]' if params else '["{build}/prog"]'
    return write(tmp_path / "b.toml", f"""[experiment]
name = "prog"
runs = 1
warmup = 0
build = ["make", "-s", "-C", "{{src}}", "OUT={{build}}"]
repo = "{repo}"

[measure]
backend = "cachegrind"

[[variant]]
name = "commit"

[[workload]]
name = "prog"
argv = {argv}
timeout = 60
{params}

[[workload.metric]]
name = "instructions"
primary = true
""")


def bisect(tmp_path: Path, spec_path: Path, good: str, bad: str):
    return cli("bisect", spec_path, "--good", good, "--bad", bad, "--db", tmp_path / "r.db", cwd=tmp_path)


def test_a_regression_from_a_merged_branch_is_traced_into_the_branch(tmp_path):
    repo = new_repo(tmp_path)
    good = git(repo, "rev-parse", "HEAD")
    change(repo, "main: unrelated 1")
    git(repo, "checkout", "-q", "-b", "side", good)
    change(repo, "side: unrelated 1", log="SIDE")
    culprit = change(repo, "side: do more work", slower=True, log="SIDE")
    change(repo, "side: unrelated 2", log="SIDE")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    merge = git(repo, "rev-parse", "HEAD")
    change(repo, "main: unrelated 2")
    out = bisect(tmp_path, spec(tmp_path, repo), good, "main")
    assert out.code == 0, out.err
    assert out.out.splitlines()[0] == f'commit: {culprit} ("side: do more work")'
    assert f"searched: first parents from good to bad, then into the branch merged by {merge[:12]})" in out.out


def test_a_merge_whose_branch_is_all_good_is_the_culprit(tmp_path):
    """An evil merge: the branch is harmless, the merge commit itself makes it slower."""
    repo = new_repo(tmp_path)
    good = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "side")
    change(repo, "side: unrelated 1", log="SIDE")
    git(repo, "checkout", "-q", "main")
    change(repo, "main: unrelated 1")
    git(repo, "merge", "-q", "--no-ff", "--no-commit", "side")
    write(repo / "work.h", "#define LOOPS 28000UL\n")
    git(repo, "commit", "-q", "-am", "Merge side (and more work)")
    merge = git(repo, "rev-parse", "HEAD")
    out = bisect(tmp_path, spec(tmp_path, repo), good, "main")
    assert out.code == 0, out.err
    assert out.out.splitlines()[0] == f'commit: {merge} ("Merge side (and more work)")'
    assert "(every commit of it good: the merge itself)" in out.out


def test_an_unbuildable_candidate_is_skipped(tmp_path):
    repo = new_repo(tmp_path)
    good = git(repo, "rev-parse", "HEAD")
    broken = "$(error this commit does not build)\n"
    for i in range(1, 7):
        change(repo, f"unrelated {i}", makefile=broken if i == 4 else MAKEFILE if i == 5 else None)
    culprit = change(repo, "do more work", slower=True)
    change(repo, "unrelated 7")
    out = bisect(tmp_path, spec(tmp_path, repo), good, "main")
    assert out.code == 0, out.err
    assert out.out.splitlines()[0] == f'commit: {culprit} ("do more work")'
    assert any(" skip " in line and "unrelated 4" in line for line in out.out.splitlines()), out.out


def test_only_skipped_commits_left_names_the_range(tmp_path):
    """The commit before the culprit cannot be built: the range left is named, exit 1, no culprit claimed."""
    repo = new_repo(tmp_path)
    good = git(repo, "rev-parse", "HEAD")
    change(repo, "unrelated 1")
    unbuildable = change(repo, "break the build", makefile="$(error broken)\n")
    culprit = change(repo, "fix the build, do more work", slower=True, makefile=MAKEFILE)
    change(repo, "unrelated 2")
    out = bisect(tmp_path, spec(tmp_path, repo), good, "main")
    last = out.err.strip().splitlines()[-1]
    assert out.code == 1 and out.out == "", out.err
    assert last.startswith(f"perfab: the first bad commit is one of {unbuildable[:12]} {culprit[:12]} (after good ")
    assert last.endswith("could not be built and were skipped; fix their build or bisect them by hand")


def test_a_sweep_spec_is_bisected_at_its_points(tmp_path):
    repo = new_repo(tmp_path)
    good = git(repo, "rev-parse", "HEAD")
    change(repo, "unrelated 1")
    culprit = change(repo, "do more work", slower=True)
    change(repo, "unrelated 2")
    out = bisect(tmp_path, spec(tmp_path, repo, "params = {scale = [1, 2]}"), good, "main")
    assert out.code == 0, out.err
    assert out.out.splitlines()[0] == f'commit: {culprit} ("do more work")'
    assert "bisecting instructions at scale=" in out.err
