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
