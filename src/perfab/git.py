"""Running git: the one place perfab starts it (sides built from refs, kernels, history, bisect).

git runs in the repository (``git -C``) with the C locale, so its messages
read the same on every machine, and without a terminal on stdin, so it never
waits for a password.  A missing git is an error of the caller's kind that
names what git was needed for.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from perfab.errors import UsageError

_FOR_SIDES = "to build sides from git refs"  # what git is needed for when a spec names refs
TIMEOUT_S = 600  # longer than any local git command perfab runs; a hung one (a network remote) ends


def run_git(repo: Path | str, *args: str, needed_for: str, error: type[Exception] = UsageError,
            timeout: float | None = TIMEOUT_S) -> subprocess.CompletedProcess:
    """``git -C repo args``, its text output captured; ``error`` names the fix when git cannot start."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "LC_ALL": "C"}, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise error(f"git is not installed; install it (apt-get install git) {needed_for}") from None
    except OSError as e:
        raise error(f"{repo}: cannot run git there ({e.strerror})") from None


def git_output(repo: Path | str, *args: str, needed_for: str, error: type[Exception] = UsageError) -> str:
    """The output of a git command that must succeed; ``error`` with git's last words when it fails."""
    done = run_git(repo, *args, needed_for=needed_for, error=error)
    if done.returncode != 0:
        raise error(f"git {' '.join(args)} failed in {repo}: "
                    f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return done.stdout


def spec_repository(repo: str | None, spec_path: str) -> Path:
    """The git repository a spec's sides are built from: its ``experiment.repo``, else the one holding the
    spec file."""
    if repo:
        start = Path(repo)
        if not start.is_dir():
            why = "is not a directory" if start.exists() else "does not exist"
            where = "" if start.is_absolute() else f" (relative to {Path.cwd()})"
            raise UsageError(f"experiment.repo {repo!r} {why}{where}; set it to the git repository the sides' "
                             "git refs name")
    else:
        start = Path(spec_path).resolve().parent
    done = run_git(start, "rev-parse", "--show-toplevel", needed_for=_FOR_SIDES)
    if done.returncode == 0 and done.stdout.strip():
        return Path(done.stdout.strip())
    bare = run_git(start, "rev-parse", "--is-bare-repository", "--absolute-git-dir", needed_for=_FOR_SIDES)
    if bare.returncode == 0 and bare.stdout.split()[:1] == ["true"]:
        return Path(bare.stdout.split("\n")[1].strip())  # a bare repository: sides are checked out from it
    raise UsageError(f"{start} is not inside a git repository; set experiment.repo to the repository the "
                     "sides' git refs name")
