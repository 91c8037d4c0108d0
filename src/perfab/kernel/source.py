"""Where a kernel side's source tree comes from, and what names it.

Three kinds of source, each with an identity that goes into the build
cache's key:

- a tarball (Debian's ``/usr/src/linux-source-6.1.tar.xz`` by default):
  ``tar:<sha256>:<size>``, extracted once into ``<cache>/sources/``;
- a git repository and a ref: ``git:<commit>``, the commit's files written
  there with ``git archive``;
- a tree on disk, used in place: ``tree:<sha256 of every file's path, mode
  and content>``.

Extracted trees are never written again: their files are made read-only and
a side with patches gets a private copy (hard links; ``git apply`` and
``patch`` replace a file rather than write through the link).  Digests of
large inputs are remembered under ``<cache>/memo/`` by path, size, mtime
and inode, so naming an unchanged source again reads no file contents.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from perfab.errors import UsageError
from perfab.git import run_git

DEBIAN_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


@contextmanager
def locked(path: Path):
    """Hold an exclusive ``flock`` on ``path`` (created if absent) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def scratch(cache_root: Path, prefix: str):
    """A private directory under ``<cache>/tmp`` for the block (same filesystem as the cache, so its
    results can be renamed into place), removed afterwards; its ``.lock`` is held meanwhile."""
    (cache_root / "tmp").mkdir(parents=True, exist_ok=True)
    where = Path(tempfile.mkdtemp(prefix=prefix, dir=cache_root / "tmp"))
    try:
        with open(where / ".lock", "a+b") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def sweep(cache_root: Path, min_age_s: float = 60.0) -> None:
    """Remove scratch directories left by killed processes (older than ``min_age_s``, lock not held)."""
    for where in (cache_root / "tmp").glob("*"):
        try:
            if time.time() - where.stat().st_mtime < min_age_s:
                continue
            with open(where / ".lock", "a+b") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(where, ignore_errors=True)
        except OSError:
            continue


def identify(source: str | None, ref: str | None, cache_root: Path) -> str:
    """The source's identity string, reading as little as the memo allows."""
    path = _source_path(source)
    if ref is not None:
        if path.is_file() or not (path / ".git").exists() and not (path / "HEAD").is_file():
            what = "a tarball" if path.is_file() else "a directory that is no git repository"
            default = " (the default source, Debian's linux-source)" if source is None else ""
            raise UsageError(f"variant.kernel.ref = {ref!r} names a git commit, but the source {path}{default} is "
                             f"{what}; set variant.kernel.source to a git clone of Linux, or remove ref")
        return f"git:{_commit(path, ref)}"
    if path.is_file():
        return f"tar:{_memo(cache_root, 'file', _stat_sig([path]), lambda: _file_sha256(path))}:{path.stat().st_size}"
    _check_tree(path)
    files = _tree_files(path)
    return f"tree:{_memo(cache_root, 'tree', _stat_sig(files, path), lambda: _tree_sha256(path, files))}"


def tree_for(source: str | None, identity: str, cache_root: Path, say) -> Path:
    """The source tree to build, extracted into the cache on first use."""
    path = _source_path(source)
    if identity.startswith("tree:"):
        return path.resolve()
    kind, digest = identity.split(":")[:2]
    where = cache_root / "sources" / f"{kind}-{digest[:16]}"
    if where.is_dir():
        return where
    with locked(cache_root / "locks" / f"source-{kind}-{digest[:16]}.lock"):
        if not where.is_dir():
            _extract(path, kind, digest, where, cache_root, say)
    return where


def _source_path(source: str | None) -> Path:
    if source is None:
        if not DEBIAN_TARBALL.is_file():
            raise UsageError(f"no kernel source: {DEBIAN_TARBALL} is absent; install it (apt-get install "
                             "linux-source-6.1, or `make kernel-deps`) or set the side's kernel source")
        return DEBIAN_TARBALL
    path = Path(source).expanduser()
    if not path.exists():
        raise UsageError(f"no kernel source at {path}; give a kernel tree, a tarball or a git repository")
    return path


def _check_tree(path: Path) -> None:
    if not (path / "Makefile").is_file() or not (path / "Kconfig").is_file():
        raise UsageError(f"{path} is not a kernel source tree (no Makefile and Kconfig at its top); give the "
                         "tree's top directory, a tarball or a git repository")
    if (path / ".config").exists() or (path / "include" / "config").exists():
        raise UsageError(f"kernel tree {path} was configured in place (it has .config); run `make mrproper` "
                         "there so perfab can build it out of tree")


def _commit(repo: Path, ref: str) -> str:
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise UsageError(f"git ref {ref!r} names no commit in {repo}; check the kernel's git ref "
                         f"(git -C {repo} log --oneline)")
    return done.stdout.strip()


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return run_git(repo, *args, needed_for="to build kernels from git refs", timeout=None)


def _extract(path: Path, kind: str, digest: str, where: Path, cache_root: Path, say) -> None:
    """Unpack a tarball or a commit into ``where`` (via a scratch directory and a rename), files read-only."""
    with scratch(cache_root, "source-") as tmp:
        if kind == "tar":
            say(f"extracting {path} into the kernel cache (once)")
            done = subprocess.run(["tar", "-xf", str(path), "-C", str(tmp)], capture_output=True, text=True)
        else:
            say(f"writing commit {digest[:12]} of {path} into the kernel cache (once)")
            pipe = f"git -C {_q(path)} archive --format=tar {digest} | tar -xf - -C {_q(tmp)}"
            done = subprocess.run(["bash", "-o", "pipefail", "-c", pipe], capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"cannot unpack kernel source {path} ({last}); check the file or repository")
        top = _top(tmp)
        _check_tree(top)
        _read_only(top)
        where.parent.mkdir(parents=True, exist_ok=True)
        top.rename(where)


def _q(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def _top(tmp: Path) -> Path:
    """A tarball's single top directory (``linux-source-6.1/``), or the extraction directory itself."""
    entries = [e for e in tmp.iterdir() if e.name != ".lock"]
    if len(entries) == 1 and entries[0].is_dir() and not (tmp / "Makefile").exists():
        return entries[0]
    inner = tmp / "tree"
    inner.mkdir()
    for e in entries:
        e.rename(inner / e.name)
    return inner


def _read_only(top: Path) -> None:
    for dirpath, _, filenames in os.walk(top):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode & ~0o222)


def private_copy(tree: Path, where: Path) -> Path:
    """A copy of ``tree`` at ``where`` that patches may change (hard links where the filesystem allows)."""
    done = subprocess.run(["cp", "-al", str(tree), str(where)], capture_output=True)
    if done.returncode != 0:
        shutil.rmtree(where, ignore_errors=True)
        subprocess.run(["cp", "-a", str(tree), str(where)], check=True, capture_output=True)
    for dirpath, _, _ in os.walk(where):
        os.chmod(dirpath, os.stat(dirpath).st_mode | 0o200)
    return where


def _memo(cache_root: Path, kind: str, signature: str, compute) -> str:
    """A digest remembered under a stat signature; computed on a miss."""
    path = cache_root / "memo" / f"{kind}-{signature}.json"
    try:
        return json.loads(path.read_text())["digest"]
    except (OSError, ValueError, KeyError):
        pass
    digest = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"digest": digest}))
    tmp.replace(path)
    return digest


def _stat_sig(files: list[Path], root: Path | None = None) -> str:
    h = hashlib.sha256()
    for f in files:
        st = f.lstat()
        name = str(f.relative_to(root)) if root else str(f.resolve())
        h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_mode}\n".encode())
    return h.hexdigest()[:32]


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _tree_files(top: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        out.extend(Path(dirpath) / n for n in sorted(filenames))
    return out


def _tree_sha256(top: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        rel = str(f.relative_to(top))
        if f.is_symlink():
            h.update(f"L {rel}\0{os.readlink(f)}\n".encode())
        else:
            h.update(f"F {rel}\0{os.access(f, os.X_OK)}\0{_file_sha256(f)}\n".encode())
    return h.hexdigest()


def apply_patches(tree: Path, patches: tuple[str, ...]) -> None:
    """Apply each patch in order to ``tree`` (a private copy): ``git apply``, else ``patch -p1``."""
    env = {**os.environ, "LC_ALL": "C", "GIT_CEILING_DIRECTORIES": str(tree.parent)}
    for patch in patches:
        path = Path(patch)
        git = ["git", "apply", "--whitespace=nowarn", str(path.resolve())]
        gnu = ["patch", "-p1", "--batch", "--forward", "-i", str(path.resolve())]
        checked = _run(git[:2] + ["--check"] + git[2:], tree, env)
        if checked.returncode == 0:
            _run(git, tree, env, check=True)
            continue
        dry = _run(gnu[:2] + ["--dry-run"] + gnu[2:], tree, env)
        if dry.returncode == 0:
            _run(gnu, tree, env, check=True)
            continue
        raise UsageError(f"patch {path} does not apply: {_first_failure(checked.stderr, dry.stdout)}; "
                         "rebase it onto this kernel source")


def _run(argv: list[str], cwd: Path, env: dict, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          check=check)


def _first_failure(git_err: str, patch_out: str) -> str:
    """The first failing hunk, as git (file:line) or patch (Hunk #N FAILED at L) names it."""
    for line in git_err.splitlines():
        if line.startswith("error: patch failed:"):
            return "first failing hunk at " + line.split("patch failed:", 1)[1].strip()
    current = ""
    for line in patch_out.splitlines():
        if line.startswith("checking file "):
            current = line[len("checking file "):]
        elif "FAILED at" in line or "can't find file" in line.lower():
            return f"{current}: {line.strip().rstrip('.')}" if current else line.strip()
    return next((x.removeprefix("error: ") for x in git_err.splitlines() if x.strip()), "no hunk applies")
