"""perfab bisect on a generated repository: one commit in 30 makes the program slower."""

from __future__ import annotations

import math
import os
import shutil
import subprocess

import pytest

from core_helpers import cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("cc") is None,
                                reason="needs git and a C compiler (make test installs them)")

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
N_COMMITS = 30
CULPRIT = 19  # the 19th commit after good makes LOOPS 40% larger


def _git(repo, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    r = tmp_path_factory.mktemp("bisect") / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "prog.c").write_text(PROGRAM)
    (r / "Makefile").write_text("$(OUT)/prog: prog.c work.h\n\tcc -O1 -o $(OUT)/prog prog.c\n")
    (r / "work.h").write_text("#define LOOPS 200000UL\n")
    (r / "CHANGES").write_text("start\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-q", "-m", "good: the starting point")
    for i in range(1, N_COMMITS + 1):
        with open(r / "CHANGES", "a") as f:
            f.write(f"change {i}\n")
        message = f"unrelated change {i}"
        if i == CULPRIT:
            (r / "work.h").write_text("#define LOOPS 280000UL\n")
            message = "lib: do the work twice over (slower)"
        _git(r, "commit", "-q", "-am", message)
    return r


def _spec(repo, tmp_path, backend: str, runs: int, metric: str, scale: int | str = 1) -> str:
    spec = tmp_path / "bisect.toml"
    spec.write_text(f"""
[experiment]
name = "prog"
runs = {runs}
warmup = {0 if backend else 1}
build = ["make", "-s", "-C", "{{src}}", "OUT={{build}}"]
repo = "{repo}"
{'[measure]' if backend else ''}
{backend}

[[variant]]
name = "commit"

[[workload]]
name = "prog"
argv = ["{{build}}/prog", "{scale}"]
timeout = 60

[[workload.metric]]
name = "{metric}"
primary = true
""")
    return str(spec)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is installed by make test")
def test_bisect_finds_the_culprit_under_cachegrind_in_log2_steps(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path, 'backend = "cachegrind"', runs=1, metric="instructions")
    code, out, err = cli("bisect", spec, "--good", "main~30", "--bad", "main", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    culprit = _git(repo, "rev-parse", f"main~{N_COMMITS - CULPRIT}").strip()
    lines = out.splitlines()
    assert lines[0] == f'commit: {culprit} ("lib: do the work twice over (slower)")'
    assert lines[1].startswith("prog.instructions (lower is better): +") and lines[1].endswith("% regression")
    steps = [line for line in lines if line.startswith("  ") and (" bad " in line or " good " in line)]
    assert len(steps) <= math.ceil(math.log2(N_COMMITS)) + 2
    assert "PARENT-" not in out and f"culprit-{culprit[:12]}" in out and "**" in out
    code, listing, _ = cli("list", "--db", str(tmp_path / "r.db"))
    assert listing.count("prog-bisect-") == len(steps) + 2  # every step stored: ends, candidates, confirmation


def test_bisect_finds_the_culprit_by_wall_time(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path, "", runs=8, metric="wall_s", scale=300)  # about 60 ms a run
    code, out, err = cli("bisect", spec, "--good", "main~30", "--bad", "main", "--db", str(tmp_path / "r.db"),
                         "--retries", "3")
    if code != 0 and ("cannot decide" in err or "do not differ beyond noise" in err):
        pytest.skip(f"wall-clock noise on this machine now: {err.strip().splitlines()[-1]}")
    assert code == 0, err
    culprit = _git(repo, "rev-parse", f"main~{N_COMMITS - CULPRIT}").strip()
    load = os.getloadavg()[0]
    if not out.splitlines()[0].startswith(f"commit: {culprit}") and load > 1.5:  # this test keeps one CPU busy
        pytest.skip(f"wall-clock bisect on a busy machine (load average {load:.2f}) named another commit")
    assert out.splitlines()[0].startswith(f"commit: {culprit}")


def test_bisect_refuses_ends_that_do_not_differ(repo, tmp_path, monkeypatch):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is installed by make test")
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path, 'backend = "cachegrind"', runs=1, metric="instructions")
    code, out, err = cli("bisect", spec, "--good", "main~30", "--bad", "main~20", "--db", str(tmp_path / "r.db"))
    assert code == 1 and "do not differ beyond noise" in err and len(err.splitlines()[-1:]) == 1


FIRST_STEP, SECOND_STEP = 9, 23  # two regressions in one range: LOOPS 200000 -> 240000 -> 300000


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    r = tmp_path_factory.mktemp("bisect2") / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "prog.c").write_text(PROGRAM)
    (r / "Makefile").write_text("$(OUT)/prog: prog.c work.h\n\tcc -O1 -o $(OUT)/prog prog.c\n")
    (r / "work.h").write_text("#define LOOPS 200000UL\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-q", "-m", "good: the starting point")
    for i in range(1, N_COMMITS + 1):
        with open(r / "prog.c", "a") as f:
            f.write(f"/* change {i} */\n")
        message = f"unrelated change {i}"
        if i in (FIRST_STEP, SECOND_STEP):
            (r / "work.h").write_text(f"#define LOOPS {240000 if i == FIRST_STEP else 300000}UL\n")
            message = f"lib: more work (step {1 if i == FIRST_STEP else 2})"
        _git(r, "commit", "-q", "-am", message)
    return r


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is installed by make test")
def test_bisect_over_two_steps_finds_the_first_and_names_the_second(two_steps, tmp_path, monkeypatch):
    """Regression: across a range with two steps bisect stopped with "cannot decide" and asked for more runs."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(two_steps, tmp_path, 'backend = "cachegrind"', runs=1, metric="instructions")
    db = str(tmp_path / "r.db")
    code, out, err = cli("bisect", spec, "--good", "main~30", "--bad", "main", "--db", db)
    assert code == 0, err
    first = _git(two_steps, "rev-parse", f"main~{N_COMMITS - FIRST_STEP}").strip()
    lines = out.splitlines()
    assert lines[0] == f'commit: {first} ("lib: more work (step 1)")'
    assert lines[2].startswith("a further change follows: bad differs from the culprit by +")
    assert f"--good {first[:12]} --bad " in lines[2]
    # Deterministic counts: every candidate decided in its first session, none run again.
    _, listing, _ = cli("list", "--db", db)
    assert listing.count("prog-bisect-") >= 4 and listing.count(" 1 session(s)") == listing.count("prog-bisect-")


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is installed by make test")
def test_bisect_of_a_sweep_spec_bisects_the_point_named_or_the_worst(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(repo, tmp_path, 'backend = "cachegrind"', runs=1, metric="instructions", scale="{scale}")
    text = open(spec).read().replace('timeout = 60\n', 'timeout = 60\nparams = { scale = [1, 2] }\n')
    open(spec, "w").write(text)
    db = str(tmp_path / "r.db")
    culprit = _git(repo, "rev-parse", f"main~{N_COMMITS - CULPRIT}").strip()
    code, out, err = cli("bisect", spec, "--good", "main~30", "--bad", "main", "--db", db)
    assert code == 0, err  # no --param: the point that regressed most
    assert out.splitlines()[0] == f'commit: {culprit} ("lib: do the work twice over (slower)")'
    code, _, err = cli("bisect", spec, "--good", "main~30", "--bad", "main", "--db", db, "--param", "scale=3")
    assert code == 2 and "not a point of the sweep (1, 2)" in err
    code, out, err = cli("bisect", spec, "--good", "main~30", "--bad", "main", "--db", db, "--param", "scale=2")
    assert code == 0, err
    assert out.splitlines()[0] == f'commit: {culprit} ("lib: do the work twice over (slower)")'
    assert out.splitlines()[1].startswith("prog.instructions (lower is better): +")
    assert "a further change follows" not in out  # one step in this range
