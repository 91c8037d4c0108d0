"""Kernel sources: identities of tarballs, git refs and trees, extracted once and read-only.

A two-file stand-in for a kernel tree (a Makefile and a Kconfig) is enough
here: nothing is configured or built, only named, archived and unpacked
with the real git and tar.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from perfab.errors import UsageError
from perfab.kernel import source as ksource

ROOT = Path(__file__).resolve().parents[2]


def tiny_tree(where: Path, version: str = "1") -> Path:
    (where / "kernel").mkdir(parents=True)
    (where / "Makefile").write_text(f"VERSION = {version}\n")
    (where / "Kconfig").write_text("config SMP\n\tbool \"SMP\"\n")
    (where / "kernel" / "a.c").write_text("int a;\n")
    return where


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CEILING_DIRECTORIES": str(repo.parent)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def test_git_refs_are_named_by_commit_and_unpacked_read_only(tmp_path: Path):
    repo = tiny_tree(tmp_path / "repo")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "Makefile").write_text("VERSION = 2\n")
    git(repo, "commit", "-qam", "two")
    cache = tmp_path / "cache"
    ident = ksource.identify(str(repo), "HEAD~1", cache)
    assert ident == f"git:{first}"
    assert ksource.identify(str(repo), "HEAD", cache) != ident
    tree = ksource.tree_for(str(repo), ident, cache, lambda line: None)
    assert (tree / "Makefile").read_text() == "VERSION = 1\n"  # the commit's files, not the work tree's
    assert not os.access(tree / "kernel" / "a.c", os.W_OK) or os.geteuid() == 0
    assert (tree / "kernel" / "a.c").stat().st_mode & 0o222 == 0
    with pytest.raises(UsageError, match="git ref 'nope' names no commit"):
        ksource.identify(str(repo), "nope", cache)


def test_tree_identity_follows_content_and_is_remembered(tmp_path: Path):
    tree = tiny_tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    one = ksource.identify(str(tree), None, cache)
    assert ksource.identify(str(tree), None, cache) == one
    assert len(list((cache / "memo").iterdir())) == 1
    (tree / "kernel" / "a.c").write_text("int b;\n")
    two = ksource.identify(str(tree), None, cache)
    assert two != one and two.startswith("tree:")
    assert ksource.tree_for(str(tree), two, cache, lambda line: None) == tree.resolve()  # used in place


def test_private_copy_takes_patches_without_touching_the_original(tmp_path: Path):
    tree = tiny_tree(tmp_path / "tree")
    os.chmod(tree / "kernel" / "a.c", 0o444)
    (tmp_path / "p.patch").write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int a;\n+int patched;\n")
    copy = ksource.private_copy(tree, tmp_path / "copy")
    ksource.apply_patches(copy, (str(tmp_path / "p.patch"),))
    assert (copy / "kernel" / "a.c").read_text() == "int patched;\n"
    assert (tree / "kernel" / "a.c").read_text() == "int a;\n"


SCRIPT = """
import sys
sys.path.insert(0, {src!r})
from perfab.kernel import source
ident = source.identify({tar!r}, None, __import__("pathlib").Path({cache!r}))
print(source.tree_for({tar!r}, ident, __import__("pathlib").Path({cache!r}), lambda line: print("EXTRACTED")))
"""


def test_two_processes_extract_a_tarball_once(tmp_path: Path):
    tree = tiny_tree(tmp_path / "linux-x")
    for i in range(300):
        (tree / "kernel" / f"f{i}.c").write_text("x" * 4096)
    tar = tmp_path / "linux-x.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        t.add(tree, arcname="linux-x")
    cache = tmp_path / "cache"
    digest = ksource.identify(str(tar), None, cache).split(":")[1]
    code = SCRIPT.format(src=str(ROOT / "src"), tar=str(tar), cache=str(cache))
    # Both start while the source's lock is held here, so both find the tree absent and must queue on the lock.
    with ksource.locked(cache / "locks" / f"source-tar-{digest[:16]}.lock"):
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
                 for _ in range(2)]
        time.sleep(2.0)
        assert all(p.poll() is None for p in procs)  # waiting, not extracting
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert sum(o.count("EXTRACTED") for o in outs) == 1, outs
    paths = {o.strip().splitlines()[-1] for o in outs}
    assert len(paths) == 1
    assert (Path(paths.pop()) / "kernel" / "f299.c").stat().st_size == 4096
    assert not list((tmp_path / "cache" / "tmp").iterdir())
