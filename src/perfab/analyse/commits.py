"""Where stored sessions' commits sit in their repository's history.

``topological_positions(repo, commits)`` numbers the commits the way
``git rev-list --topo-order`` lists them, oldest first: no commit comes
before one of its ancestors.  Commits on parallel branches get an order
too, git's, which is not a statement about which came first.  Only the
history from the commits' common ancestor up is listed (``git merge-base
--octopus``), so a kernel repository with a million commits costs no more
than the range a bisection or a series of sessions spans.

``order_commits`` picks the repository: the one named, else the first
that holds every commit of: the one the newest session's spec names
(``experiment.repo``, or the directory holding the spec, which may be
relative to where ``perfab run`` ran), a checkout of a side
(``sources[side]["src"]``, a git worktree of that repository) while it
still exists.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from perfab.errors import PerfabError, UsageError
from perfab.git import run_git


class OrderError(PerfabError):
    """The commits cannot be ordered by the repository (it lacks one, or git is missing)."""


def topological_positions(repo: Path, commits: list[str]) -> dict[str, int]:
    """Each commit's position in ``git rev-list --topo-order``, oldest first (0 for the oldest)."""
    unique = sorted(set(commits))
    if not unique:
        return {}
    base = _git(repo, "merge-base", "--octopus", *unique)
    base_commit = base.stdout.strip() if base.returncode == 0 else ""
    listed = _git(repo, "rev-list", "--topo-order", *unique, *([f"^{base_commit}"] if base_commit else []))
    if listed.returncode != 0:
        missing = [c for c in unique if _git(repo, "cat-file", "-e", f"{c}^{{commit}}").returncode != 0]
        what = f"commit {missing[0][:12]} is not in it" if missing else _last(listed.stderr)
        raise OrderError(f"{repo}: cannot order the sessions' commits ({what})")
    order = ([base_commit] if base_commit else []) + listed.stdout.split()[::-1]
    positions = {c: i for i, c in enumerate(order)}
    missing = [c for c in unique if c not in positions]
    if missing:
        raise OrderError(f"{repo}: commit {missing[0][:12]} is not in its history")
    return {c: positions[c] for c in unique}


def order_commits(commits: list[str], named: str | None, spec_repo, checkouts: list[str]) -> tuple[Path, dict]:
    """(repository, positions): the commits' topological positions in the first candidate repository that
    holds them all (see the module docstring); OrderError naming why when none does."""
    if named:
        if (top := _toplevel(Path(named))) is None:
            raise UsageError(f"--repo {named}: not a git repository; pass the repository the sides were built from")
        return top, topological_positions(top, commits)
    why = ("the repository the sides were built from was not found (the spec's directory and the checkouts "
           "are gone)")
    for candidate in _candidates(spec_repo, checkouts):
        try:
            return candidate, topological_positions(candidate, commits)
        except OrderError as e:
            why = str(e)
    raise OrderError(f"{why}; pass --repo PATH")


def _candidates(spec_repo, checkouts: list[str]):
    """The spec's repository, then each checkout that still exists, each once."""
    seen = set()
    try:
        first = [spec_repo()]
    except PerfabError:
        first = []
    for path in first + [Path(src) for src in checkouts if src and Path(src).is_dir()]:
        top = _toplevel(path) if path is not None else None
        if top is not None and top not in seen:
            seen.add(top)
            yield top


def _toplevel(path: Path) -> Path | None:
    done = _git(path, "rev-parse", "--show-toplevel")
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def _last(text: str) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[-1][:160] if lines else "git failed"


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_git(cwd, *args, needed_for="to order sessions by commit", error=OrderError)
