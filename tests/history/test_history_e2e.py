"""A real history: ``perfab run`` builds a C program at each commit of a generated repository and runs it.

The program prints how many loop iterations it was compiled to do; the
sixth of ten commits triples it, so the parsed count steps from 100,000 to
300,000 and the wall time with it.  Sessions are run in a shuffled order
of commits by checking each one out, as a bisection does.
"""

from __future__ import annotations

import json
import random
import shutil

import pytest

from history_helpers import cli, git

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("cc") is None,
                                reason="needs git and a C compiler (make test installs them)")

PROGRAM = """#include <stdio.h>
int main(void) {{ volatile unsigned long x = 0; for (unsigned long i = 0; i < {loops}UL; i++) x += i;
printf("loops: {loops}\\n"); return 0; }}
"""

SPEC = """
[experiment]
name = "loops"
runs = 2
warmup = 0
repo = "{repo}"
build = ["make", "-s", "-C", "{{src}}", "OUT={{build}}"]

[[variant]]
name = "tip"
git = "HEAD"

[[workload]]
name = "prog"
argv = ["{{build}}/prog"]
parser = "keyvalue"

[[workload.metric]]
name = "loops"
direction = "lower"
"""


def test_a_real_history_finds_the_commit_that_tripled_the_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "Makefile").write_text("prog: prog.c\n\tcc -O1 -o $(OUT)/prog prog.c\n")
    commits = []
    for i in range(10):
        (repo / "prog.c").write_text(PROGRAM.format(loops=100_000 if i < 5 else 300_000) + f"/* {i} */\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"prog: revision {i}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    spec = tmp_path / "loops.toml"
    spec.write_text(SPEC.format(repo=repo))
    order = list(range(10))
    random.Random(5).shuffle(order)
    for i in order:
        git(repo, "checkout", "-q", "--detach", commits[i])
        code, _, err = cli("run", str(spec), "--db", str(tmp_path / "r.db"), "--no-report")
        assert code == 0, err
    code, out, err = cli("history", "--db", str(tmp_path / "r.db"), "--metric", "loops", "--format", "json")
    assert code == 0, err
    (series,) = json.loads(out)["series"]
    assert [p["commit"] for p in series["points"]] == commits
    assert [p["median"] for p in series["points"]] == [100_000.0] * 5 + [300_000.0] * 5
    (change,) = series["change_points"]
    assert change["commit"] == commits[5] and change["change"] == pytest.approx(2.0) and change["p"] <= 0.05
    code, out, _ = cli("history", "--db", str(tmp_path / "r.db"), "--metric", "loops")
    assert ">> change point: +200.00% regression (mean 100,000 -> 300,000)" in out
