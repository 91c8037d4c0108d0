"""An experiment's sessions as a history: one point per session, change points found in it.

``history(store, name)`` reads every stored session of an experiment and,
per workload, sweep point, side and metric, makes a series: each session's
median of its runs with the median's distribution-free interval
(``perfab.analyse.summary.median_interval``) and the number of runs.  The
sessions are put in the order of their commits when every session of the
side was built from git (the repository's ``git rev-list --topo-order``,
``perfab.analyse.commits``; sessions of one commit by date), else in the
order they started.

Change points are found in the series of session medians by E-divisive
with means and its permutation test (``perfab.analyse.edivisive``).  A
session is the unit: runs within a session share its boot, build and
machine state, so the series of medians, not the pooled runs, is what
varies from commit to commit.  Each change is reported with the means of
the session medians on either side and its p-value, and with the machine
settings (``perfab.machine.differences``) and workload definitions that
differ across it, since such a difference, not the commit, may be the
cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfab.analyse.commits import OrderError, order_commits
from perfab.analyse.edivisive import Detection, EDivisive
from perfab.analyse.compare import judged
from perfab.analyse.summary import median_interval
from perfab.git import spec_repository
from perfab.errors import PerfabError, UsageError
from perfab.specfile import Experiment, parse_spec
from perfab.specfile.stored import definitions
from perfab.store import Dataset, Params, Session, Store


@dataclass(frozen=True)
class Point:
    """One session's runs of one series."""

    session: int  # session id
    started_at: float  # unix time the session started
    commit: str | None  # the side's commit when it was built from git
    ref: str | None  # the git ref the spec named
    subject: str | None  # the commit's subject line
    n: int  # runs with a finite value
    median: float  # median of those runs
    lo: float  # lower end of the median's interval (-inf when too few runs)
    hi: float  # upper end (inf when too few runs)


@dataclass(frozen=True)
class Change:
    """A change point: the series differs from ``index`` on."""

    index: int  # position of the first session after the change
    before: float  # mean of the session medians from the previous change point up to this one
    after: float  # mean of the session medians from this change point up to the next
    change: float | None  # after / before - 1; None when ``before`` is 0
    p: float  # permutation p-value when it was found
    found: int  # 1 for the strongest (found first), 2 for the next, ...
    machine: tuple[tuple[str, str, str], ...]  # (key, before, after): settings that differ across it
    warnings: tuple[str, ...]  # other differences across it (workload definitions, backend)


@dataclass(frozen=True)
class Series:
    """One metric of one workload (at one sweep point) on one side, session by session."""

    workload: str  # workload name
    params: Params  # sweep point, () outside sweeps
    side: str  # side name
    metric: str  # metric name as stored
    label: str  # metric label
    unit: str | None  # unit of the values
    higher_is_better: bool | None  # direction; None: no good side
    points: tuple[Point, ...]  # sessions, in order
    detection: Detection | None  # the change point search; None with too few sessions
    changes: tuple[Change, ...]  # the change points, by position


@dataclass(frozen=True)
class SideOrder:
    """How one side's sessions are ordered."""

    side: str  # side name
    by: str  # commit | date
    repository: str | None  # the repository whose topological order was used
    note: str | None  # why sessions with commits are in date order


@dataclass(frozen=True)
class History:
    """Everything ``perfab history`` prints."""

    experiment: str  # experiment name
    sessions: int  # sessions stored
    orders: tuple[SideOrder, ...]  # per side, how its sessions are ordered
    series: tuple[Series, ...]  # one per workload, point, side and metric
    alpha: float  # significance level of each change point's permutation test
    confidence: float  # level of the median's intervals
    method: EDivisive  # the change point method and its settings


def history(store: Store, name: str | None = None, metrics: list[str] | None = None, side: str | None = None,
            alpha: float = 0.05, confidence: float | None = None, repo: str | None = None,
            permutations: int = 199, seed: int = 1) -> History:
    """The history of experiment ``name`` (the newest by default); see the module docstring."""
    data = store.load(name or store.latest_experiment())
    if not data.sessions:  # its sessions deleted by hand
        raise UsageError(f"{store.path}: experiment {data.experiment!r} holds no session; run it first "
                         "(perfab run SPEC)")
    spec = _spec(data.sessions[-1])
    confidence = spec.confidence if confidence is None else confidence
    for flag, value in (("--alpha", alpha), ("--confidence", confidence)):
        if not 0 < value < 1:
            raise UsageError(f"{flag} {value}: must lie strictly between 0 and 1 (e.g. 0.05 and 0.95)")
    method = EDivisive(alpha=alpha, permutations=permutations, seed=seed)
    values = _session_values(data)
    sides = _sides(values, side)
    ran = {s: {sid for k, per in values.items() if k[2] == s for sid in per} for s in sides}
    orders = {s: _order(tuple(x for x in data.sessions if x.id in ran[s]), s, spec, repo) for s in sides}
    series = []
    for workload, point, s, metric in _keys(values, data, spec, metrics, sides):
        ranked = sorted(values[(workload, point, s, metric)].items(), key=lambda kv: orders[s][1][kv[0]])
        points = [_point(_session(data, sid), s, v, confidence) for sid, v in ranked]
        series.append(_series(data, spec, workload, point, s, metric, points, method))
    return History(data.experiment, len(data.sessions), tuple(orders[s][0] for s in sides), tuple(series),
                   alpha, confidence, method)


def _session(data: Dataset, session: int) -> Session:
    """The stored session with id ``session`` (looked up by id: a history may hold many thousands)."""
    return data.session_by_id[session]


def _spec(session: Session) -> Experiment:
    try:
        return parse_spec(session.spec_text, session.spec_path or "<stored spec>")
    except PerfabError as e:
        raise UsageError(f"the newest session's stored spec no longer reads ({e}); it cannot label the "
                         "history") from None


def _session_values(data: Dataset) -> dict[tuple, dict[int, np.ndarray]]:
    """(workload, point, side, metric) -> session -> the finite values of its measured runs, in run order.

    Read from the dataset's columns; the keys come in the order the runs first give them."""
    from perfab.store.columns import groups

    t = data.table
    measured = t.measured()
    found = []
    for rank, (metric, s) in enumerate(data.samples.items()):
        keep = measured[s.rows] & np.isfinite(s.values) & ~data.excluded_mask(s.rows, metric)
        rows, values = s.rows[keep], s.values[keep]
        for group in groups(t.side_key(rows)):
            r = int(rows[group[0]])
            key = (t.workload[r], t.params[r], t.variant[r], metric)
            found.append(((r, rank), key, _by_session(t.session[rows[group]], values[group])))
    found.sort(key=lambda f: f[0])
    return {key: per for _, key, per in found}


def _by_session(sessions: np.ndarray, values: np.ndarray) -> dict[int, np.ndarray]:
    """session -> its values (in their order), sessions in first-seen order."""
    by = np.argsort(sessions, kind="stable")
    ids, starts = np.unique(sessions[by], return_index=True)
    parts = np.split(values[by], starts[1:])
    first = np.argsort([by[i] for i in starts], kind="stable")
    return {int(ids[k]): parts[k] for k in first}


def _sides(values: dict, side: str | None) -> list[str]:
    sides = list(dict.fromkeys(k[2] for k in values))
    if side is not None and side not in sides:
        known = ", ".join(sides) or "none"
        raise UsageError(f"--side {side}: no measured runs of that side; sides with runs: {known}")
    return [side] if side is not None else sides


def _keys(values: dict, data: Dataset, spec: Experiment, metrics: list[str] | None, sides: list[str]):
    """The series to show, in spec order: the metrics asked for, else each workload's declared ones, else
    every metric with a direction."""
    stored = list(dict.fromkeys((k[0], k[3]) for k in values))
    if metrics:
        chosen = [(w, m) for w, m in stored if m in metrics or judged(spec, data, w, m).label in metrics]
        unknown = [m for m in metrics if not any(m in (mm, judged(spec, data, w, mm).label) for w, mm in stored)]
        if unknown:
            names = ", ".join(dict.fromkeys(m for _, m in stored))
            raise UsageError(f"--metric {unknown[0]}: no such metric stored; stored metrics: {names}")
    else:
        chosen = [(w, m) for w, m in stored if _default(spec, data, w, m)]
    order = {w.name: i for i, w in enumerate(spec.workloads)}
    chosen.sort(key=lambda wm: order.get(wm[0], len(order)))
    return [k for w, m in chosen for s in sides for k in values if k[0] == w and k[3] == m and k[2] == s]


def _default(spec: Experiment, data: Dataset, workload: str, metric: str) -> bool:
    declared = [m for m in _workload_metrics(spec, workload) if m.check is None]
    if declared:
        return any(m.name == metric for m in declared)
    meta = data.meta.get((workload, metric))
    return meta is not None and meta.higher_is_better is not None


def _workload_metrics(spec: Experiment, workload: str):
    return next((w.metrics for w in spec.workloads if w.name == workload), ())


def _order(sessions: tuple[Session, ...], side: str, spec: Experiment, repo: str | None):
    """(SideOrder, session id -> sort key) for one side, over the sessions that ran it."""
    by_date = {s.id: (0, s.started_at, s.id) for s in sessions}
    commits = {s.id: (s.sources.get(side) or {}).get("commit") for s in sessions}
    with_commit = [sid for sid, c in commits.items() if c]
    if not with_commit:
        return SideOrder(side, "date", None, None), by_date
    if len(with_commit) < len(sessions):
        bare = [str(sid) for sid, c in commits.items() if not c]
        note = f"session(s) {', '.join(bare[:5])} of side {side} were not built from git"
        return SideOrder(side, "date", None, note), by_date
    checkouts = [(s.sources.get(side) or {}).get("src", "") for s in reversed(sessions)]
    try:
        where, positions = order_commits(list(commits.values()), repo, lambda: _spec_repository(spec), checkouts)
    except OrderError as e:
        return SideOrder(side, "date", None, str(e)), by_date
    keys = {s.id: (positions[commits[s.id]], s.started_at, s.id) for s in sessions}
    return SideOrder(side, "commit", str(where), None), keys


def _spec_repository(spec: Experiment) -> Path | None:
    return spec_repository(spec.repo, spec.path)


def _point(session: Session, side: str, values: list[float], confidence: float) -> Point:
    source = session.sources.get(side) or {}
    median, lo, hi = median_interval(np.array(values), confidence)
    return Point(session.id, session.started_at, source.get("commit"), source.get("ref"), source.get("subject"),
                 len(values), median, lo, hi)


def _series(data: Dataset, spec: Experiment, workload: str, point: Params, side: str, metric: str,
            points: list[Point], method: EDivisive) -> Series:
    judged_ = judged(spec, data, workload, metric)
    detection = method.detect([p.median for p in points]) if len(points) >= 2 * method.min_size else None
    changes = _changes(data, points, detection, workload) if detection else ()
    return Series(workload, point, side, metric, judged_.label, judged_.unit, judged_.higher_is_better, tuple(points),
                  detection, changes)


def _changes(data: Dataset, points: list[Point], detection: Detection, workload: str) -> tuple[Change, ...]:
    cuts = [0, *(c.index for c in detection.change_points), len(points)]
    medians = np.array([p.median for p in points])
    out = []
    for k, cp in enumerate(detection.change_points, start=1):
        before, after = float(medians[cuts[k - 1]:cuts[k]].mean()), float(medians[cuts[k]:cuts[k + 1]].mean())
        a, b = _session(data, points[cp.index - 1].session), _session(data, points[cp.index].session)
        out.append(Change(cp.index, before, after, after / before - 1 if before else None, cp.p, cp.found,
                          _machine(data, points, cp.index), _definitions(a, b, workload)))
    return tuple(out)


def _machine(data: Dataset, points: list[Point], index: int) -> tuple[tuple[str, str, str], ...]:
    """Settings that differ between the sessions either side of a change, leaving out those that differ
    between every two neighbouring sessions (a property of each build, such as a kernel's release)."""
    from perfab.machine import differences

    envs = [_session(data, p.session).environment for p in points]
    across = differences(envs[index - 1], envs[index])
    pairs = [{k for k, _, _ in differences(x, y)} for x, y in zip(envs, envs[1:])]
    always = set.intersection(*pairs) if len(pairs) >= 2 else set()
    return tuple(d for d in across if d[0] not in always)


def _definitions(a: Session, b: Session, workload: str) -> tuple[str, ...]:
    out = []
    if (definitions(a) or {}).get(workload) != (definitions(b) or {}).get(workload):
        out.append(f"the definition of workload {workload!r} changed between sessions {a.id} and {b.id}")
    if a.backend != b.backend:
        out.append(f"measured by {a.backend} in session {a.id} but {b.backend} in session {b.id}")
    return tuple(out)
