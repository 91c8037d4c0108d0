"""Commits ordered by a generated repository's topological order: branches, merges, a bounded range."""

from __future__ import annotations

import shutil

import pytest

from history_helpers import git, make_repo
from perfab.analyse.commits import OrderError, order_commits, topological_positions

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (make test installs it)")


def _commit(repo, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def test_parents_come_before_children_across_a_merge(tmp_path):
    repo = tmp_path / "repo"
    (a,) = make_repo(repo, [1.0])
    b = _commit(repo, "b on main")
    git(repo, "checkout", "-q", "-b", "topic", a)
    c = _commit(repo, "c on topic")
    d = _commit(repo, "d on topic")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    m = git(repo, "rev-parse", "HEAD")
    e = _commit(repo, "e after the merge")
    pos = topological_positions(repo, [e, c, m, a, d, b])
    for parent, child in ((a, b), (a, c), (c, d), (b, m), (d, m), (m, e)):
        assert pos[parent] < pos[child], (parent[:7], child[:7])
    assert pos[a] == 0 and sorted(pos.values())[-1] == pos[e]


def test_only_the_range_from_the_common_ancestor_is_listed(tmp_path):
    commits = make_repo(tmp_path / "repo", [1.0] * 12)
    pos = topological_positions(tmp_path / "repo", commits[9:5:-1])
    assert pos == {commits[6]: 0, commits[7]: 1, commits[8]: 2, commits[9]: 3}


def test_a_commit_the_repository_lacks_is_named(tmp_path):
    make_repo(tmp_path / "repo", [1.0, 2.0])
    with pytest.raises(OrderError, match="commit 0123456789ab is not in it"):
        topological_positions(tmp_path / "repo", ["0123456789abcdef0123456789abcdef01234567"])


def test_the_first_repository_holding_every_commit_orders_them(tmp_path):
    commits = make_repo(tmp_path / "repo", [1.0, 2.0])
    make_repo(tmp_path / "other", [3.0])  # a repository, but not the one the sides came from
    git(tmp_path / "repo", "worktree", "add", "-q", "--detach", str(tmp_path / "checkout"), "HEAD")
    where, pos = order_commits(commits, None, lambda: tmp_path / "other",
                               [str(tmp_path / "nowhere"), str(tmp_path / "checkout")])
    assert where == tmp_path / "checkout" and pos == {commits[0]: 0, commits[1]: 1}


def test_no_repository_holding_the_commits_is_an_order_error_naming_the_fix(tmp_path):
    commits = make_repo(tmp_path / "repo", [1.0])
    make_repo(tmp_path / "other", [3.0])

    def gone():
        raise OrderError("spec directory gone")

    with pytest.raises(OrderError, match="was not found .*; pass --repo PATH"):
        order_commits(commits, None, gone, [str(tmp_path / "nowhere")])
    with pytest.raises(OrderError, match=f"commit {commits[0][:12]} is not in it.*; pass --repo PATH"):
        order_commits(commits, None, lambda: tmp_path / "other", [])
