"""Process trees on real processes: found whole, stopped whole, with or without the helper."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from perfab.run import proctree
from perfab.run.proctree import ProcessTree, descendants

ENV = dict(os.environ, LC_ALL="C")
# A shell with a child in its own session and a grandchild below a subshell; prints "<sid child> <grandchild>".
TREE = "setsid sleep 1000 & a=$!; (sleep 1000 & echo $a $!; wait) & wait"


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def started(tmp_path, argv) -> tuple[ProcessTree, list[int]]:
    out = tmp_path / "out"
    with open(out, "wb") as f:
        tree = ProcessTree(argv, ENV, None, f)
    deadline = time.monotonic() + 5
    while len(out.read_bytes().split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    return tree, [int(p) for p in out.read_bytes().split()]


def test_descendants_from_children_files_and_from_a_proc_scan_agree(tmp_path):
    tree, pids = started(tmp_path, ["sh", "-c", TREE])
    try:
        below = descendants(tree.pid)
        by_scan = proctree._parent_map_children()
        scanned, todo = [], [tree.pid]
        while todo:
            kids = by_scan(todo.pop())
            scanned += kids
            todo += kids
        assert set(pids) <= set(below) and sorted(below) == sorted(scanned)
    finally:
        tree.kill()
    assert not any(alive(p) for p in [tree.pid, *pids])


def test_a_command_deaf_to_sigterm_is_killed_after_the_grace(tmp_path):
    tree, pids = started(tmp_path, ["sh", "-c", f"trap '' TERM; {TREE}"])
    t0 = time.monotonic()
    tree.kill(grace_s=0.5)
    assert 0.5 <= time.monotonic() - t0 < 2.0
    assert not tree.alive() and not any(alive(p) for p in pids)


NO_HELPER = """
import os, sys, time
from perfab.run.proctree import ProcessTree
tree = ProcessTree(["/bin/sh", "-c", "/bin/sleep 1000 & echo $!; wait"], {}, None, sys.stdout)
time.sleep(0.3)
print(tree.contained, tree.alive(), len(tree.pids()), flush=True)
tree.kill(grace_s=2)
print(tree.alive(), tree.returncode, flush=True)
"""


def test_without_the_helper_the_process_group_is_still_stopped(tmp_path):
    env = dict(ENV, XDG_CACHE_HOME=str(tmp_path), CC="/nonexistent/cc", PATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", NO_HELPER], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    sleeper, first, second = out.stdout.splitlines()
    assert first == "False True 2" and second == "False -15"
    assert not alive(int(sleeper))
