"""Helpers of the history tests: a generated git repository and sessions of real runners over it.

Each commit of the repository holds a file ``speed``; a side built from a
commit is checked out by perfab's build step (a real ``git worktree``), and
the fake executor's workload reads ``speed`` from that checkout, so what a
session measures is decided by the commit it ran, as with a real build.
"""

from __future__ import annotations

import io
import random
import subprocess
from pathlib import Path

from perfab.cli import main
from perfab.run.backends import TimeBackend
from perfab.run.executor import FakeExecutor, FakeOutcome
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Store

ENV = {"cpu.model": "Test CPU 3000", "cpu.cores": "4", "kernel.release": "6.1.0-test", "host.name": "bench1"}

SPEC = """\
[experiment]
name = "tlb"
runs = {runs}
warmup = 0
seed = 1
repo = "{repo}"

[[variant]]
name = "kernel"
git = "{ref}"

[[workload]]
name = "will-it-scale"
argv = ["{{src}}/tlb_flush2", "-t", "{threads}"]
parser = "keyvalue"

[[workload.metric]]
name = "per_thread_ops"
direction = "higher"
primary = true
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "GIT_COMMITTER_DATE": "2022-03-01T00:00:00",
                               "GIT_AUTHOR_DATE": "2022-03-01T00:00:00", "PATH": "/usr/bin:/bin",
                               "HOME": str(repo)})
    return done.stdout.strip()


def make_repo(root: Path, speeds: list[float]) -> list[str]:
    """A repository with one commit per speed (oldest first); returns their hashes."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commits = []
    for i, speed in enumerate(speeds):
        (root / "speed").write_text(f"{speed}\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "--allow-empty", "-m", f"mm: change {i}")
        commits.append(git(root, "rev-parse", "HEAD"))
    return commits


def behaviour(seed: int, noise: float = 0.005):
    """per_thread_ops around 100,000 times the checkout's speed, with seeded relative noise."""
    rng = random.Random(seed)

    def run(argv, env):
        speed = float((Path(argv[0]).parent / "speed").read_text())
        ops = round(100_000 * speed * (1 + rng.gauss(0, noise)))
        return FakeOutcome(wall_s=0.01, stdout=f"per_thread_ops: {ops}\n".encode())

    return run


def run_session(db: Path, spec_dir: Path, repo: Path, ref: str, seed: int, env: dict | None = None,
                runs: int = 8, threads: int = 2) -> None:
    """One finished session of side ``kernel`` built from ``ref``."""
    text = SPEC.format(runs=runs, repo=repo, ref=ref, threads=threads)
    path = spec_dir / "tlb.toml"
    path.write_text(text)
    with Store(db) as store:
        runner = Runner(parse_spec(text, str(path)), store, TimeBackend(), FakeExecutor(behaviour(seed)),
                        dict(env or ENV))
        assert runner.run().status == "finished"


def run_plain(db: Path, seed: int) -> None:
    """One finished session of a spec whose side is not built from git."""
    text = SPEC.format(runs=3, repo="", ref="x", threads=2).replace('git = "x"\n', "").replace('repo = ""\n', "")
    text = text.replace("{src}/tlb_flush2", "./tlb_flush2")
    Path("speed").write_text("1.0\n")
    with Store(db) as store:
        runner = Runner(parse_spec(text, "tlb.toml"), store, TimeBackend(), FakeExecutor(behaviour(seed)), dict(ENV))
        assert runner.run().status == "finished"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()
