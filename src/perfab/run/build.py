"""Sides built from source, once per session, before any run is stored.

A variant with ``git = "REF"`` is built from that commit: perfab resolves
the ref to its commit hash in the experiment's repository
(``experiment.repo``, by default the repository holding the spec), checks
the commit out into a cache directory (``git worktree add --detach``)
keyed by the commit and the build command, runs the build there and keeps
its log beside it.  A cache entry that built once is reused: a second
session (or a bisect step) skips the build.  ``{src}`` is the checkout and
``{build}`` a build directory beside it; both are placeholders for the
side's commands.  An entry is built in a fresh directory beside it (the
build command sees that directory as ``{src}`` and ``{build}``) and
published by rename under a per-entry lock, so it is never rebuilt in
place and two processes never build it at once; its content hash is
stored with the session and checked whenever the entry is used again
(``perfab.run.buildcache``).  A build runs under a subreaper: when it ends,
times out or perfab is stopped, every process it started is stopped too.

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
import signal
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from perfab.errors import PerfabError, UsageError
from perfab.git import run_git, spec_repository
from perfab.run.buildcache import aside, content_hash, discard, entry_lock
from perfab.run.proctree import ProcessTree
from perfab.specfile import Experiment, Variant, expand
from perfab.terminal import visible

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
    content: str | None = None  # SHA-256 of the built files (perfab.run.buildcache.content_hash)
    layout: str = ""  # {layout_cflags} of a layout build (perfab.run.layoutbuild); "": the side's own

    def values(self) -> dict[str, str]:
        return {"src": self.src, "build": self.build_dir}

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, ())}


def build_command(exp: Experiment, variant: Variant) -> tuple[str, ...]:
    return variant.build or exp.build


def needs_source(exp: Experiment, variant: Variant) -> bool:
    return bool(variant.git or build_command(exp, variant))


def resolve(exp: Experiment, variants: list[Variant], cache: Path = CACHE, layout: str = "",
            suffix: str = "") -> dict[str, Source]:
    """Each side's source, with git refs resolved to commits (nothing is built or checked out yet); a layout build
    (``perfab.run.layoutbuild``) passes its ``{layout_cflags}`` and, built in the spec's directory, a suffix of its
    build directory."""
    try:
        return _resolve(exp, variants, cache, layout, suffix)
    except UsageError as e:
        raise type(e)(f"{exp.path}: {e}") from None


def _resolve(exp: Experiment, variants: list[Variant], cache: Path, layout: str, suffix: str) -> dict[str, Source]:
    out = {}
    for v in variants:
        if not needs_source(exp, v):
            continue
        command_t = build_command(exp, v)
        if v.git:
            repo = repository(exp)
            commit, subject = _rev_parse(repo, v.git)
            key = hashlib.sha256(json.dumps([commit, list(command_t), *([layout] if layout else [])]).encode())
            key = key.hexdigest()[:16]
            root = (cache / f"{commit[:12]}-{key}").resolve()
            src, build_dir = root / "src", root / "build"
        else:
            commit = subject = None
            src = Path(exp.path).resolve().parent
            build_dir = (Path(".perfab") / "build" / exp.name / f"{v.name}{suffix}").resolve()
            root = build_dir
        command = _expand(exp, v, src, build_dir, layout)
        log = str(root / "build.log") if command else None
        out[v.name] = Source(v.name, v.git, commit, subject, str(src), str(build_dir), command, log, layout=layout)
    return out


def _expand(exp: Experiment, v: Variant, src: Path, build_dir: Path, layout: str = "") -> tuple[str, ...]:
    """The side's build command with ``{src}`` and ``{build}`` (and the other placeholders) filled in;
    ``{layout_cflags}`` is the aligned pair's (``perfab.run.aligned``, a side's vars) and a layout build's."""
    own = v.vars.get("layout_cflags", "")
    values = {"variant": v.name, "experiment": exp.name, "src": str(src), "build": str(build_dir), **v.vars,
              "layout_cflags": " ".join(f for f in (own, layout) if f)}
    return tuple(expand(a, values, f"variant {v.name!r} build") for a in build_command(exp, v))


def build_all(exp: Experiment, sources: dict[str, Source], env_of, say,
              recorded: dict[str, str] | None = None) -> dict[str, Source]:
    """Check out and build every side that needs it; returns the sources with ``cached`` and ``content`` set.

    ``recorded`` maps a side to the content hash its session stored (on resume): a build whose files no
    longer hash to it is refused, so a session never measures two builds of one side."""
    done = {}
    for name, source in sources.items():
        built = _build(exp, exp.variant(name), source, env_of(exp.variant(name)), say, (recorded or {}).get(name))
        want = (recorded or {}).get(name)
        if want and built.content and want != built.content:
            raise BuildError(f"variant {name!r}: its build is not the one this session measured (content "
                             f"{want[:12]}, now {built.content[:12]}); start a new session with --new-session")
        done[name] = built
    return done


def _build(exp: Experiment, variant: Variant, s: Source, env: dict[str, str], say,
           recorded: str | None = None) -> Source:
    if s.commit:
        return _build_entry(exp, variant, s, env, say)
    build_dir = Path(s.build_dir)
    with entry_lock(build_dir, say):
        if recorded and build_dir.is_dir() and content_hash(build_dir) == recorded:
            say(f"{variant.name}: build unchanged since the session began; not rebuilt")
            return replace(s, cached=True, content=recorded)
        build_dir.mkdir(parents=True, exist_ok=True)
        if s.command:
            say(f"building {variant.name}: {shlex.join(s.command)} (log: {s.log})")
            _run_build(variant, s, env, exp.build_timeout_s)
        return replace(s, content=content_hash(build_dir))


def _build_entry(exp: Experiment, variant: Variant, s: Source, env: dict[str, str], say) -> Source:
    """A git side: reuse its published cache entry, or build one aside and publish it by rename."""
    root = Path(s.src).parent
    with entry_lock(root, say):
        if (root / STAMP).exists():
            return _reuse(variant, s, root, say)
        repo = repository(exp)
        discard(root)  # a half-made entry of an interrupted build (no stamp)
        tmp = aside(root)
        discard(tmp)
        _git(repo, "worktree", "prune")
        try:
            _checkout(repo, s.commit, tmp / "src")
            (tmp / "build").mkdir()
            if s.command:
                say(f"building {variant.name}: {shlex.join(s.command)} (log: {s.log})")
                log = root.parent / f"{root.name}.build.log"  # kept there when the build fails
                here = replace(s, src=str(tmp / "src"), build_dir=str(tmp / "build"), log=str(log),
                               command=_expand(exp, variant, tmp / "src", tmp / "build", s.layout))
                _run_build(variant, here, env, exp.build_timeout_s)
                os.replace(log, tmp / "build.log")
            built = replace(s, content=content_hash(tmp))
            (tmp / STAMP).write_text(json.dumps(built.to_json(), sort_keys=True) + "\n")
            os.rename(tmp, root)
        except BaseException:
            discard(tmp)
            _git(repo, "worktree", "prune")
            raise
        _git(repo, "worktree", "repair", str(root / "src"))
        return built


def _reuse(variant: Variant, s: Source, root: Path, say) -> Source:
    """A published entry, after checking that its files are still those it was built with."""
    try:
        recorded = json.loads((root / STAMP).read_text()).get("content")
    except (OSError, ValueError):
        recorded = None
    now = content_hash(root)
    if recorded is not None and now != recorded:
        raise BuildError(f"variant {variant.name!r}: cache entry {root} changed after it was built (content "
                         f"{recorded[:12]}, now {now[:12]}); something wrote into it: remove the directory "
                         "to build it again")
    say(f"{variant.name}: built before (cache {root.name}); not rebuilt")
    return replace(s, cached=True, content=now)


def _run_build(variant: Variant, s: Source, env: dict[str, str], timeout_s: float) -> None:
    """Run the build under a subreaper: on a timeout, a signal or its end, nothing it started survives."""
    argv = ["/bin/sh", "-c", s.command[0]] if len(s.command) == 1 and " " in s.command[0] else list(s.command)
    if _missing(argv[0], env, s.src):
        raise BuildError(f"variant {variant.name!r}: build program {argv[0]!r} not found; install it or fix "
                         "the build command")
    Path(s.log).parent.mkdir(parents=True, exist_ok=True)
    with open(s.log, "wb") as log, _signals_stop(variant.name):
        try:
            tree = ProcessTree(argv, env, s.src, log)
        except OSError as e:
            raise BuildError(f"variant {variant.name!r}: cannot start the build {argv[0]!r} ({e.strerror or e}); "
                             "fix the build command") from None
        try:
            code = tree.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BuildError(f"variant {variant.name!r}: build did not finish in {timeout_s:g} s (log: {s.log}); "
                             "its processes are stopped; raise experiment.build_timeout") from None
        finally:
            tree.kill(grace_s=2.0)  # the build's background children too
    if code != 0:
        raise BuildError(f"variant {variant.name!r}: build `{shlex.join(s.command)}` exited {code} "
                         f"({_last_line(Path(s.log))}); full log: {s.log}")


def _missing(program: str, env: dict[str, str], cwd: str) -> bool:
    """Whether ``program`` cannot be found the way exec would look for it (PATH, or a path from ``cwd``)."""
    if "/" in program:
        return not os.access(os.path.join(cwd, program), os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.defpath)) is None


class BuildStopped(PerfabError):
    """A signal stopped perfab during a build; the build's processes are stopped, nothing is stored."""


@contextmanager
def _signals_stop(side: str):
    """Turn SIGTERM and SIGHUP during a build into ``BuildStopped`` (exit 128+N) so the build tree is killed."""
    def stop(signum, frame):
        err = BuildStopped(f"stopped by {signal.Signals(signum).name} while building {side!r}; its processes "
                           "are stopped and nothing is stored; run again to build it")
        err.exit_code = 128 + signum
        raise err

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _last_line(path: Path) -> str:
    """The line of a build log that says what went wrong: the last error line, else the last line."""
    try:
        lines = [x.strip() for x in path.read_bytes().decode(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no output"
    lines = [x for x in lines if not re.match(r"make(\[\d+\])?: (Entering|Leaving) directory", x)]
    errors = [x for x in lines if re.search(r"error|\*\*\*|fatal|not found", x, re.IGNORECASE)]
    chosen = (errors or lines or ["no output"])[-1]
    return visible(chosen[:160])


def repository(exp: Experiment) -> Path:
    """The git repository sides are built from: ``experiment.repo``, else the one holding the spec."""
    return spec_repository(exp.repo, exp.path)


def _rev_parse(repo: Path, ref: str) -> tuple[str, str]:
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise UsageError(f"git ref {ref!r} names no commit in {repo}; check variant.git (git log --oneline)")
    commit = done.stdout.strip()
    subject = _git(repo, "log", "-1", "--format=%s", commit).stdout.strip()
    return commit, subject


def _checkout(repo: Path, commit: str, where: Path) -> None:
    where.parent.mkdir(parents=True, exist_ok=True)
    done = _git(repo, "worktree", "add", "--detach", "--force", str(where), commit)
    if done.returncode != 0:
        raise BuildError(f"cannot check out {commit[:12]} into {where} "
                         f"({(done.stderr.strip().splitlines() or ['git failed'])[-1]}); check the repository")


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_git(cwd, *args, needed_for="to build sides from git refs")
