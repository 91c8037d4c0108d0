"""Sessions pooled into one comparison although what they measured differs: warnings naming the difference.

perfab pools every stored session of an experiment into its comparison
(more runs, and between-session variation seen).  That is sound only while
each side measured the same thing: the same build, the same spec, on the
same machine.  Pooling is kept (the runs are real, and a user may mean it),
but each difference becomes a warning under the table naming the side,
what differs and the sessions on each side of it, so a pooled delta is
never read as one build's: a side's build (commit or content hash of a
built side, ``perfab.run.build``), the content of a program a side runs
(``perfab.run.programs``), the kernel image a side booted (its SHA-256), the
spec's text, and the machine (host name).
Start a new database, or give ``report`` one session's database, to keep
them apart.  Each warning is a ``Diagnostic`` of kind ``pooled`` whose
data names the side, what differs and how many versions are pooled.
"""

from __future__ import annotations

from perfab.analyse.diagnostics import Diagnostic, Kind
from perfab.specfile import Experiment
from perfab.store import Session


def pooled_warnings(sessions: list[Session], spec: Experiment) -> list[Diagnostic]:
    """One warning per side and kind of difference between the sessions that are pooled."""
    out = []
    for v in spec.variants:
        mine = [s for s in sessions if s.side in (None, v.name)]
        out += _build_warnings(mine, v.name) + _program_warnings(mine, v.name) + _kernel_warnings(mine, v.name)
        hosts = _groups(mine, lambda s: s.host)
        if len(hosts) > 1:
            out.append(_pooled(f"side {v.name!r}: sessions from different machines are pooled "
                               f"({_describe(hosts, 'name')}); compare one machine's sessions", v.name, "machine",
                               hosts))
    specs = _groups(sessions, lambda s: s.spec_text)
    if len(specs) > 1:
        out.append(_pooled(f"the spec differs between pooled sessions ({_describe(specs, 'version')}); runs under "
                           "different specs are compared as one", None, "spec", specs))
    return out


def _pooled(text: str, side: str | None, differs: str, groups: dict, program: str | None = None) -> Diagnostic:
    """A ``pooled`` diagnostic: ``groups`` are the versions of what differs, each with its sessions."""
    return Diagnostic(Kind.POOLED, text, {"side": side, "differs": differs, "program": program,
                                          "versions": len(groups)})


def _build_warnings(sessions: list[Session], side: str) -> list[Diagnostic]:
    builds = _groups(sessions, lambda s: _source(s, side).get("content") or _source(s, side).get("commit"))
    if len(builds) <= 1:
        return []
    return [_pooled(f"side {side!r}: sessions of different builds are pooled ({_describe(builds)}); a delta over "
                    "them mixes builds: use one database per build", side, "build", builds)]


def _kernel_warnings(sessions: list[Session], side: str) -> list[Diagnostic]:
    """The kernel image a side booted (its SHA-256, ``sources[side]["kernel"]``) differs between sessions."""
    kernels = _groups(sessions, lambda s: (_source(s, side).get("kernel") or {}).get("sha256"))
    if len(kernels) <= 1:
        return []
    return [_pooled(f"side {side!r}: sessions that booted different kernels are pooled ({_describe(kernels)}); a "
                    "delta over them mixes kernels: use one database per kernel", side, "kernel", kernels)]


def _program_warnings(sessions: list[Session], side: str) -> list[Diagnostic]:
    paths = sorted({p for s in sessions for p in (_source(s, side).get("programs") or {})})
    out = []
    for path in paths:
        versions = _groups(sessions, lambda s: (_source(s, side).get("programs") or {}).get(path))
        if len(versions) > 1:
            out.append(_pooled(f"side {side!r}: {path} changed between pooled sessions ({_describe(versions)}); "
                               "a delta over them mixes programs: use one database per version", side, "program",
                               versions, path))
    return out


def _source(session: Session, side: str) -> dict:
    value = (session.sources or {}).get(side)
    return value if isinstance(value, dict) else {}


def _groups(sessions: list[Session], key) -> dict[str, list[int]]:
    """Session ids by ``key`` (sessions without it are left out)."""
    out: dict[str, list[int]] = {}
    for s in sessions:
        k = key(s)
        if k:
            out.setdefault(k, []).append(s.id)
    return out


NAMED_IDS = 3  # session ids a warning names per version; the rest are counted
NAMED_VERSIONS = 3  # versions a warning names; the rest are counted with their sessions


def _describe(groups: dict[str, list[int]], label: str = "hash") -> str:
    """``abc123def456 in sessions 1, 2; 0f1e2d3c4b5a in session 3``: keys as a short hash, a name or a version.

    A few ids and versions are named and the rest counted (``sessions 1, 11, 21 and 997 more``), so a
    warning over thousands of pooled sessions stays one line."""
    parts = []
    items = list(groups.items())
    for i, (key, ids) in enumerate(items[:NAMED_VERSIONS], 1):
        name = {"hash": key[:12], "name": key, "version": f"version {i}"}[label]
        parts.append(f"{name} in {_sessions(ids)}")
    rest = items[NAMED_VERSIONS:]
    if rest:
        more = sum(len(ids) for _, ids in rest)
        what = "machines" if label == "name" else "versions"
        parts.append(f"{len(rest):,} more {what} in {more:,} session{'s' if more != 1 else ''}")
    return "; ".join(parts)


def _sessions(ids: list[int]) -> str:
    """``session 3``, ``sessions 1, 2`` or ``sessions 1, 11, 21 and 997 more``."""
    if len(ids) == 1:
        return f"session {ids[0]}"
    if len(ids) <= NAMED_IDS + 1:
        return f"sessions {', '.join(map(str, ids))}"
    return f"sessions {', '.join(map(str, ids[:NAMED_IDS]))} and {len(ids) - NAMED_IDS:,} more"
