"""Where kernels are built: the same paths every time, and object trees kept for the next build.

kbuild writes the source tree's absolute path into every compile command
(``-I<srctree>/include``) and rebuilds a file whose command changed; ccache
hashes those commands too.  So every kernel of one source is built in one
*slot*, ``<cache>/slots/<source>/{src,obj}``: ``src`` a private copy of the
pristine tree (hard links) with the side's patches applied, ``obj`` the
``make O=`` directory.  One build at a time holds a slot (``flock``).

After a build its object tree is kept under ``<cache>/objtrees/<key>/``
with the resolved ``.config`` it was built from and the files its patches
changed.  A later kernel whose resolved ``.config`` is the same (a side
that differs from another only by patches) starts from a copy of that tree
and ``make`` compiles only what differs: every file that either build's
patches touched is given a fresh modification time, so a file patched for
the kept tree but not for this one is compiled again too.  The
``KEEP_OBJTREES`` most recently used trees are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from perfab.kernel import source as ksource

KEEP_OBJTREES = 4  # object trees kept for incremental builds (each a few hundred MB)
META = "perfab-objtree.json"


@dataclass(frozen=True)
class Slot:
    """The stable directories one build uses."""

    src: Path  # the source tree make builds (a private copy with the patches applied)
    obj: Path  # make's O= directory
    reused: str | None  # the cache key whose object tree obj started from, None: a clean build


@contextmanager
def build_slot(cache_root: Path, source_identity: str):
    """Hold the slot of ``source_identity`` (emptied) for the block; yields its directory."""
    name = hashlib.sha256(source_identity.encode()).hexdigest()[:16]
    where = cache_root / "slots" / name
    with ksource.locked(cache_root / "slots" / f"{name}.lock"):
        for sub in ("src", "obj"):
            shutil.rmtree(where / sub, ignore_errors=True)
        where.mkdir(parents=True, exist_ok=True)
        try:
            yield where
        finally:
            shutil.rmtree(where / "src", ignore_errors=True)
            shutil.rmtree(where / "obj", ignore_errors=True)


def fill(where: Path, pristine: Path, patches: tuple[str, ...], config: Path, cache_root: Path) -> Slot:
    """The slot's source (patched) and object directory: a kept tree of the same config, else a new one."""
    src = ksource.private_copy(pristine, where / "src")
    ksource.apply_patches(src, patches)
    touched = patched_files(patches)
    obj = where / "obj"
    kept = _matching_tree(cache_root, config.read_bytes())
    if kept is None:
        obj.mkdir()
        shutil.copyfile(config, obj / ".config")
        return Slot(src, obj, None)
    subprocess.run(["cp", "-a", "--reflink=auto", str(kept), str(obj)], check=True, capture_output=True)
    (obj / META).unlink(missing_ok=True)
    meta = json.loads((kept / META).read_text())
    _refresh(src, sorted(set(touched) | set(meta.get("patched", []))))
    return Slot(src, obj, kept.name)


def keep(slot: Slot, key: str, patches: tuple[str, ...], cache_root: Path) -> None:
    """Keep the slot's object tree for later builds of the same config; drop the least recently used."""
    trees = cache_root / "objtrees"
    trees.mkdir(parents=True, exist_ok=True)
    target = trees / key
    if target.exists():
        return
    config = (slot.obj / ".config").read_bytes()
    meta = {"config_sha256": hashlib.sha256(config).hexdigest(), "patched": patched_files(patches),
            "used": time.time()}
    (slot.obj / META).write_text(json.dumps(meta, indent=1) + "\n")
    slot.obj.rename(target)
    _prune(trees)


def patched_files(patches: tuple[str, ...]) -> list[str]:
    """The tree-relative paths the patches change, from their ``---``/``+++`` headers (-p1)."""
    out: set[str] = set()
    for patch in patches:
        for line in Path(patch).read_text(errors="replace").splitlines():
            m = re.match(r"^(?:\+\+\+|---) (\S+)", line)
            if m and m.group(1) != "/dev/null":
                out.add(m.group(1).split("/", 1)[1] if "/" in m.group(1) else m.group(1))
    return sorted(out)


def _matching_tree(cache_root: Path, config: bytes) -> Path | None:
    """The most recently used kept object tree built from exactly this ``.config``."""
    digest = hashlib.sha256(config).hexdigest()
    best, when = None, -1.0
    for meta_path in (cache_root / "objtrees").glob(f"*/{META}"):
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if meta.get("config_sha256") == digest and meta.get("used", 0) > when:
            best, when = meta_path.parent, meta.get("used", 0)
    if best is not None:
        _touch_meta(best)
    return best


def _touch_meta(tree: Path) -> None:
    meta = json.loads((tree / META).read_text())
    meta["used"] = time.time()
    (tree / META).write_text(json.dumps(meta, indent=1) + "\n")


def _refresh(src: Path, paths: list[str]) -> None:
    """Give each file a new inode and the current time, so make compiles it again (the pristine
    tree it is linked to keeps its own time)."""
    for rel in paths:
        path = src / rel
        if not path.is_file():
            continue
        tmp = path.with_name(f".{path.name}.perfab-refresh")
        shutil.copyfile(path, tmp)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)


def _prune(trees: Path) -> None:
    kept = []
    for meta_path in trees.glob(f"*/{META}"):
        try:
            kept.append((json.loads(meta_path.read_text()).get("used", 0), meta_path.parent))
        except (OSError, ValueError):
            shutil.rmtree(meta_path.parent, ignore_errors=True)
    for _, tree in sorted(kept, reverse=True)[KEEP_OBJTREES:]:
        shutil.rmtree(tree, ignore_errors=True)
