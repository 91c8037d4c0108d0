"""Sides built from source, once per session, before any run is stored.

A variant with ``git = "REF"`` is built from that commit: perfab resolves
the ref to its commit hash in the experiment's repository
(``experiment.repo``, by default the repository holding the spec), checks
the commit out into a cache directory (``git worktree add --detach``)
keyed by the commit and the build command, runs the build there and keeps
its log beside it.  A cache entry that built once is reused: a second
session (or a bisect step) skips the build.  ``{src}`` is the checkout and
``{build}`` a build directory beside it; both are placeholders for the
side's commands.

A variant with only ``build = [...]`` (or the experiment's ``build``, with
``{variant}`` in it) runs that command in the spec's directory once per
session; ``{src}`` is that directory and ``{build}`` is
``.perfab/build/<experiment>/<variant>``.

A failed build is a ``BuildError`` naming the side, the exit status, the
last line of its output and where the whole log is; nothing is stored.
The commit hash, the command and the log path are stored with the session
(``sessions.sources``) and printed in the report's SETUP.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from perfab.errors import PerfabError, UsageError
from perfab.run.readings import clean
from perfab.spec import Experiment, Variant, expand

CACHE = Path(".perfab") / "cache"
STAMP = ".perfab-built"


class BuildError(PerfabError):
    """A side's build failed or its source could not be checked out."""


@dataclass(frozen=True)
class Source:
    """Where one side comes from and how it is built."""

    variant: str  # side name
    ref: str | None  # the git ref as written in the spec
    commit: str | None  # the full commit hash it resolved to
    subject: str | None  # the commit's subject line
    src: str  # the source tree ({src})
    build_dir: str  # the build directory ({build})
    command: tuple[str, ...]  # the build command, expanded; () without a build
    log: str | None  # the build's log file
    cached: bool = False  # the build was skipped: this commit and command built before

    def values(self) -> dict[str, str]:
        return {"src": self.src, "build": self.build_dir}

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, ())}


def build_command(exp: Experiment, variant: Variant) -> tuple[str, ...]:
    return variant.build or exp.build


def needs_source(exp: Experiment, variant: Variant) -> bool:
    return bool(variant.git or build_command(exp, variant))


def resolve(exp: Experiment, variants: list[Variant], cache: Path = CACHE) -> dict[str, Source]:
    """Each side's source, with git refs resolved to commits (nothing is built or checked out yet)."""
    try:
        return _resolve(exp, variants, cache)
    except UsageError as e:
        raise type(e)(f"{exp.path}: {e}") from None


def _resolve(exp: Experiment, variants: list[Variant], cache: Path) -> dict[str, Source]:
    out = {}
    for v in variants:
        if not needs_source(exp, v):
            continue
        command_t = build_command(exp, v)
        if v.git:
            repo = repository(exp)
            commit, subject = _rev_parse(repo, v.git)
            key = hashlib.sha256(json.dumps([commit, list(command_t)]).encode()).hexdigest()[:16]
            root = (cache / f"{commit[:12]}-{key}").resolve()
            src, build_dir = root / "src", root / "build"
        else:
            commit = subject = None
            src = Path(exp.path).resolve().parent
            build_dir = (Path(".perfab") / "build" / exp.name / v.name).resolve()
            root = build_dir
        values = {"variant": v.name, "experiment": exp.name, "src": str(src), "build": str(build_dir), **v.vars}
        command = tuple(expand(a, values, f"variant {v.name!r} build") for a in command_t)
        log = str(root / "build.log") if command else None
        out[v.name] = Source(v.name, v.git, commit, subject, str(src), str(build_dir), command, log)
    return out


def build_all(exp: Experiment, sources: dict[str, Source], env_of, say) -> dict[str, Source]:
    """Check out and build every side that needs it; returns the sources with ``cached`` set."""
    done = {}
    for name, source in sources.items():
        done[name] = _build(exp, exp.variant(name), source, env_of(exp.variant(name)), say)
    return done


def _build(exp: Experiment, variant: Variant, s: Source, env: dict[str, str], say) -> Source:
    root = Path(s.build_dir).parent if s.commit else Path(s.build_dir)
    stamp = root / STAMP
    if s.commit and stamp.exists():
        say(f"{variant.name}: built before (cache {root.name}); not rebuilt")
        return Source(**{**asdict(s), "cached": True})
    if s.commit:
        _checkout(repository(exp), s.commit, Path(s.src))
    Path(s.build_dir).mkdir(parents=True, exist_ok=True)
    if s.command:
        say(f"building {variant.name}: {shlex.join(s.command)} (log: {s.log})")
        _run_build(variant, s, env, exp.build_timeout_s)
    if s.commit:
        stamp.write_text(json.dumps(s.to_json(), sort_keys=True) + "\n")
    return s


def _run_build(variant: Variant, s: Source, env: dict[str, str], timeout_s: float) -> None:
    argv = ["/bin/sh", "-c", s.command[0]] if len(s.command) == 1 and " " in s.command[0] else list(s.command)
    Path(s.log).parent.mkdir(parents=True, exist_ok=True)
    with open(s.log, "wb") as log:
        try:
            done = subprocess.run(argv, cwd=s.src, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=timeout_s)
        except FileNotFoundError:
            raise BuildError(f"variant {variant.name!r}: build program {argv[0]!r} not found; install it or fix "
                             "the build command") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"variant {variant.name!r}: build did not finish in {timeout_s:.0f} s (log: {s.log}); "
                             "raise experiment.build_timeout") from None
    if done.returncode != 0:
        raise BuildError(f"variant {variant.name!r}: build `{shlex.join(s.command)}` exited {done.returncode} "
                         f"({_last_line(Path(s.log))}); full log: {s.log}")


def _last_line(path: Path) -> str:
    """The line of a build log that says what went wrong: the last error line, else the last line."""
    try:
        lines = [x.strip() for x in path.read_bytes().decode(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no output"
    lines = [x for x in lines if not re.match(r"make(\[\d+\])?: (Entering|Leaving) directory", x)]
    errors = [x for x in lines if re.search(r"error|\*\*\*|fatal|not found", x, re.IGNORECASE)]
    chosen = (errors or lines or ["no output"])[-1]
    return clean(chosen[:160])


def repository(exp: Experiment) -> Path:
    """The git repository sides are built from: ``experiment.repo``, else the one holding the spec."""
    start = Path(exp.repo) if exp.repo else Path(exp.path).resolve().parent
    done = _git(start if start.is_dir() else start.parent, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise UsageError(f"{start} is not inside a git repository; set experiment.repo to the repository the "
                         "sides' git refs name")
    return Path(done.stdout.strip())


def _rev_parse(repo: Path, ref: str) -> tuple[str, str]:
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise UsageError(f"git ref {ref!r} names no commit in {repo}; check variant.git (git log --oneline)")
    commit = done.stdout.strip()
    subject = _git(repo, "log", "-1", "--format=%s", commit).stdout.strip()
    return commit, subject


def _checkout(repo: Path, commit: str, where: Path) -> None:
    if where.exists():
        shutil.rmtree(where)  # a half-made checkout of an interrupted build
        _git(repo, "worktree", "prune")
    where.parent.mkdir(parents=True, exist_ok=True)
    done = _git(repo, "worktree", "add", "--detach", "--force", str(where), commit)
    if done.returncode != 0:
        raise BuildError(f"cannot check out {commit[:12]} into {where} "
                         f"({(done.stderr.strip().splitlines() or ['git failed'])[-1]}); check the repository")


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "LC_ALL": "C"}, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise UsageError("git is not installed; install it (apt-get install git) to build sides from git refs") \
            from None
