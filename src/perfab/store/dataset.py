"""The typed read side of a store: what the analysis needs of one experiment.

``Store.load(name)`` returns a ``Dataset``: the sessions, every counted run
(the newest attempt of each planned run; earlier attempts stay stored but
do not count) with its sweep point, its samples and their sources, the
per-run exclusions, the metrics' units and directions and the profile
shares.  ``perfab.analyse.compare(dataset, spec)`` is a pure function of
it, so the runner, a second store and sequential stopping all ask the same
question the same way.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from perfab.metrics import Metric
from perfab.plan import Params


@dataclass(frozen=True)
class Session:
    """A stored session: one invocation of ``perfab run`` (and its resumptions)."""

    id: int  # session id
    experiment: str  # experiment name
    started_at: float  # unix time
    status: str  # running | finished | interrupted | aborted
    side: str | None  # the external side this session ran, None when all sides ran
    spec_text: str  # the spec as it was
    spec_path: str  # where it was read from
    backend: str  # time | perf | cachegrind
    groups: tuple[tuple[str, ...], ...]  # counter groups
    environment: dict[str, str]  # machine snapshot
    host: str | None = None  # hostname of the machine that ran it
    owner: str | None = None  # the claim (JSON, see perfab.store.owner) while a runner holds it
    sources: dict = field(default_factory=dict)  # variant -> {"commit": ..., "build": [...], ...}
    stop_reason: str | None = None  # why a sequential session stopped
    design: dict | None = None  # how it was planned (perfab.spec.Experiment.design); None: stored before schema 4

    @property
    def sequential(self) -> bool:
        """A sequential session (runs = "auto"): it may have run its whole stored plan and still be undecided."""
        if self.design is None:
            from perfab.spec.stored import legacy_design

            return legacy_design(self.spec_text)["sequential"] is not None
        return self.design.get("sequential") is not None


@dataclass(frozen=True)
class RunInfo:
    """One counted run: the newest attempt of a planned run."""

    run_id: int  # id in the runs table
    session: int  # session id
    seq: int  # position in the session's plan
    attempt: int  # 1 for the first attempt, higher for re-runs (earlier attempts are kept)
    workload: str  # workload name
    variant: str  # side name
    params: Params  # sweep point, () outside sweeps
    group: int  # counter group index
    warmup: bool  # an unmeasured warm-up run
    block: int  # interleaving block
    started_at: float  # unix time
    status: str  # ok | failed | interrupted
    reason: str | None  # why it failed
    notes: tuple[str, ...]  # facts the backend reported

    @property
    def order(self) -> int:
        """Position in time across sessions (session, then plan position)."""
        return self.session * 10_000_000 + self.seq


@dataclass(frozen=True)
class Dataset:
    """The stored runs of one experiment, typed and indexed."""

    experiment: str  # experiment name
    sessions: tuple[Session, ...]  # oldest first
    runs: tuple[RunInfo, ...]  # counted runs, in time order
    values: dict[int, dict[str, float]]  # run id -> metric -> value
    excluded: dict[int, dict[str, str]]  # run id -> metric -> why unusable in that run
    meta: dict[tuple[str, str], Metric]  # (workload, metric) -> how it was reported
    profiles: dict[int, dict[str, float]] = field(default_factory=dict)  # run id -> profile key -> share %

    def measured(self) -> list[RunInfo]:
        """Successful non-warm-up runs."""
        return [r for r in self.runs if not r.warmup and r.status == "ok"]


@lru_cache(maxsize=4096)
def params_from_json(text: str | None) -> Params:
    """The sweep point stored as JSON (runs of one point share the text: parsed once)."""
    if not text:
        return ()
    try:
        d = json.loads(text)
    except ValueError:
        return ()
    return tuple((str(k), str(v)) for k, v in d.items()) if isinstance(d, dict) else ()


@lru_cache(maxsize=4096)
def params_to_json(params: Params) -> str:
    """A sweep point as stored (runs of one point share it: encoded once)."""
    return json.dumps(dict(params))


def group_by_run(rows) -> dict[int, dict[str, object]]:
    out: dict[int, dict[str, object]] = defaultdict(dict)
    for rid, key, value in rows:
        out[rid][key] = value
    return dict(out)
