"""Opening a session: a new one, or the unfinished one with ``--resume``; the same for run, bisect and fleet.

``open_session`` claims the session (a second runner is refused with the
holder's name), builds the sides that come from source, checks every
command of the schedule (``perfab.run.preflight``) and stores a new
session with its planned runs, all before the first run.  A resume adopts
a spec whose only change is its parsers (the stored outputs are read again)
and refuses any other change; its schedule is the runs left, and a
sequential session's look after them.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from perfab.errors import UsageError
from perfab.machine.busy import Busy
from perfab.replication import BUILD, RUN, Replication, draw_seed, stored, with_builds
from perfab.run.backends import Backend
from perfab.run.build import build_all, resolve
from perfab.run.layoutbuild import check_moved, layout_flags
from perfab.run.preflight import preflight
from perfab.run.programs import session_sources
from perfab.run.reparse import parser_only, reparse_session
from perfab.run.schedule import Schedule, new_schedule, resumed_schedule
from perfab.run.sides import Sides
from perfab.specfile import Experiment, Variant, expand
from perfab.store import Store


@dataclass(frozen=True)
class Opening:
    """How ``perfab run`` (or bisect, or a fleet job) asks for its session."""

    side: str | None = None  # --side: the external side this machine is; None detects it
    resume: bool = False  # continue the unfinished session
    new_session: bool = False  # start another session beside an unfinished one
    takeover: bool = False  # resume a session another runner still claims (its machine is gone)


@dataclass(frozen=True)
class OpenSession:
    """A claimed, stored session and what is left of its schedule."""

    id: int  # session id in the store
    side: str | None  # the external side it runs, None when all sides run
    schedule: Schedule  # the events still to happen
    busy_before: Busy | None  # other work a resumed session measured before
    replication: Replication = Replication(RUN, 1, 0)  # its unit of replication and perturbation seed


@dataclass(frozen=True)
class Opener:
    """What opening a session needs besides the experiment and the store."""

    backend: Backend  # how runs are measured (its name and groups are stored)
    sides: Sides  # each side's environment; built sources are set here
    environment: dict[str, str]  # the machine snapshot stored with a new session
    real: bool  # the executor runs real programs: look them up, hash them
    say: Callable[[str], None]  # one line for the user


def open_session(exp: Experiment, store: Store, how: Opener, opening: Opening) -> OpenSession:
    """Claim the session ``opening`` asks for, build its sides and store it; raise UsageError before any change."""
    pending = store.unfinished_session(exp.name)
    if opening.resume:
        return _resume(exp, store, how, opening, pending)
    if pending is not None and not opening.new_session:
        left = len(store.remaining(pending.id))
        raise UsageError(f"experiment {exp.name!r} has an unfinished session ({left} runs left); "
                         "continue it with --resume or start another with --new-session")
    side = resolve_side(exp, opening.side)
    sides = [side] if side else None
    seed = draw_seed() if exp.perturb_seed is None else exp.perturb_seed
    flags = layout_flags(seed, exp.layout_builds) if exp.layout_builds > 1 else [""]
    schedule = new_schedule(exp, sides, len(how.backend.groups()), _resolved(exp, sides, flags[0]))
    _build(exp, how, schedule, sides)
    _build_layouts(exp, how, sides, flags)
    preflight(exp, schedule, how.sides.env, how.real, how.sides.sources)
    sources = session_sources(exp, how.sides.sources, sides, how.sides.env, how.sides.source, how.real)
    for name, facts in how.backend.side_sources().items():
        sources.setdefault(name, {}).update(facts)
    replication = with_builds(how.backend.replication(exp, seed), exp.layout_builds, seed)
    session = store.start_session(exp.name, exp.source, exp.path, exp.spec_hash, side, how.backend.name,
                                  how.backend.groups(), how.environment, schedule.runs(), sources,
                                  {**exp.design, "replication": replication.to_json()})
    return OpenSession(session, side, schedule, None, replication)


def _resume(exp: Experiment, store: Store, how: Opener, opening: Opening, pending) -> OpenSession:
    """The unfinished session, claimed; a parser-only change of the spec reads its stored outputs again."""
    if pending is None:
        raise UsageError(f"experiment {exp.name!r} has no unfinished session to resume; run it without --resume")
    reparse = pending.spec_text != exp.source
    if reparse and not parser_only(pending.spec_text, exp.source):
        raise UsageError(f"{exp.path} changed since session {pending.id} began, beyond its parsers; "
                         "restore it or start a new session with --new-session")
    variants = tuple(v for v in exp.variants if pending.side is None or v.name == pending.side)
    how.backend.preflight(exp, variants)
    _same_kernels(pending, how.backend.side_sources())  # prebuilt images: refused before the claim
    store.claim(pending.id, opening.takeover)
    if reparse:
        _reparse(exp, store, how, pending.id)
    side = pending.side
    recorded = {k: v.get("content") for k, v in (pending.sources or {}).items() if isinstance(v, dict)}
    replication = stored(pending.design)
    flags = layout_flags(replication.seed, replication.units) if replication.unit == BUILD else [""]
    schedule = resumed_schedule(exp, side, len(how.backend.groups()),
                                _resolved(exp, [side] if side else None, flags[0]),
                                store.remaining(pending.id), store.planned(pending.id))
    _build(exp, how, schedule, [side] if side else None, recorded)
    _build_layouts(exp, how, [side] if side else None, flags)
    _same_kernels(pending, how.backend.side_sources())
    return OpenSession(pending.id, side, schedule, Busy.from_env(pending.environment), replication)


def _same_kernels(pending, now: dict[str, dict]) -> None:
    """A resumed session boots the kernels it began with: an image whose bytes changed is refused."""
    for side, facts in now.items():
        then = ((pending.sources or {}).get(side) or {}).get("kernel") or {}
        kernel = facts.get("kernel") or {}
        if then.get("sha256") and kernel.get("sha256") and then["sha256"] != kernel["sha256"]:
            raise UsageError(f"side {side!r}: kernel image {kernel.get('image')} changed since session {pending.id} "
                             f"began (sha256 {then['sha256'][:12]} then, {kernel['sha256'][:12]} now): one session "
                             "must not mix two kernels; restore the image or start a new session with --new-session")


def _reparse(exp: Experiment, store: Store, how: Opener, session: int) -> None:
    """A parser-only change on resume: read the session's stored outputs again, then adopt the spec."""
    done = reparse_session(store, session, exp, how.backend.name)
    kept = next((s.design or {} for s in store.sessions(exp.name) if s.id == session), {}).get("replication")
    store.replace_spec(session, exp.source, exp.spec_hash, {**exp.design, "replication": kept})
    how.say(f"the parser changed: {done.parsed} stored run(s) read again, {done.unparsed} still unreadable, "
            f"{done.kept} kept as they were")


def _resolved(exp: Experiment, sides: list[str] | None, layout: str = "") -> dict:
    """The sides of this session that come from source, resolved to their commits (not built yet); ``layout``: the
    first layout build's ``{layout_cflags}``."""
    return resolve(exp, [v for v in exp.variants if sides is None or v.name in sides], layout=layout)


def _build_layouts(exp: Experiment, how: Opener, sides: list[str] | None, flags: list[str]) -> None:
    """The layout builds after the first (``perfab.run.layoutbuild``), each side's in ``how.sides.layouts``; a side
    whose builds made one program is refused."""
    if len(flags) < 2:
        return
    variants = [v for v in exp.variants if sides is None or v.name in sides]
    builds = [how.sides.sources] + [build_all(exp, resolve(exp, variants, layout=flag, suffix=f"-layout{i}"),
                                              how.sides.env, how.say) for i, flag in enumerate(flags[1:], 1)]
    how.sides.layouts = {v.name: [b[v.name] for b in builds] for v in variants}
    for v in variants:
        programs = {w.argv[0] for w in exp.workloads if not w.shell}
        for template in programs:
            paths = [Path(expand(template, how.sides.values(v, w, (), unit)))
                     for w in exp.workloads if w.argv[0] == template for unit in range(len(flags))]
            check_moved(v.name, [p for p in paths if p.is_file()])


def _build(exp: Experiment, how: Opener, schedule: Schedule, sides: list[str] | None,
           recorded: dict[str, str] | None = None) -> None:
    """The schedule's builds, after its placeholders are checked (before a long build), then the backend's
    preparation of the sides; on resume ``recorded`` holds each side's content hash as the session stored it."""
    preflight(exp, schedule, how.sides.env, False, schedule.builds())
    variants = tuple(v for v in exp.variants if sides is None or v.name in sides)
    how.backend.preflight(exp, variants)
    how.sides.sources = build_all(exp, schedule.builds(), how.sides.env, how.say, recorded)
    how.backend.prepare(variants, how.say)


def resolve_side(exp: Experiment, side: str | None) -> str | None:
    """The external side this session is (``--side`` or the variants' ``detect``)."""
    if side is not None:
        exp.variant(side)  # raises for an unknown name
        if not exp.variants[0].external:
            raise UsageError(f"--side {side}: the sides of {exp.name!r} are not external; "
                             "drop --side (all sides run in one session)")
        return side
    if not exp.variants[0].external:
        return None
    matches = [v.name for v in exp.variants if v.detect and _detects(v)]
    if len(matches) != 1:
        found = "no side" if not matches else f"several sides ({', '.join(matches)})"
        raise UsageError(f"this machine matches {found} of {exp.name!r}; pass --side NAME "
                         "or fix the variants' detect / detect_pattern")
    return matches[0]


def _detects(variant: Variant) -> bool:
    """The side's ``detect`` command prints what ``detect_pattern`` matches on this machine."""
    try:
        out = subprocess.run(["/bin/sh", "-c", variant.detect], capture_output=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout.decode(errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(variant.detect_pattern, out) is not None


def analysis_stopping(store: Store, exp: Experiment):
    """The analysis's stopping test at a look (``perfab.analyse.sequential.Decision``): its ``stop``, ``reason``,
    ``look`` and ``runs_per_side``; the runner is given it and calls nothing of the analysis itself."""
    from perfab.analyse.compare import compare

    return compare(store.load(exp.name), exp).decision
