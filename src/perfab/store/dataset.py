"""The typed read side of a store: what the analysis needs of one experiment.

``Store.load(name)`` returns a ``Dataset``: the sessions, every counted run
(the newest attempt of each planned run; earlier attempts stay stored but
do not count) with its sweep point, its samples, the per-run exclusions,
the metrics' units and directions and the profile shares.  The runs and
samples are columns (``perfab.store.columns``): the analysis reads them
as numpy arrays, and ``runs`` / ``values`` give them as one object per run
for the few callers that want that (built only when asked).  A dataset
built from such objects (a simulation) gets its columns from them.
``perfab.analyse.compare(dataset, spec)`` is a pure function of it, so the
runner, a second store and sequential stopping all ask the same question
the same way.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Mapping, Sequence

from perfab.metrics import Metric
from perfab.plan import ORDER_STRIDE, Params

if TYPE_CHECKING:  # numpy is imported where columns are built: listing a store must not pay for it
    from perfab.store.columns import RunTable, Samples



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
    sources: dict = field(default_factory=dict)  # variant -> {"commit", "build", "programs", "kernel", ...}
    stop_reason: str | None = None  # why a sequential session stopped
    design: dict | None = None  # how it was planned (perfab.specfile.Experiment.design); None: stored before schema 4

    @property
    def sequential(self) -> bool:
        """A sequential session (runs = "auto"): it may have run its whole stored plan and still be undecided."""
        if self.design is None:
            from perfab.specfile.stored import legacy_design

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
    rep: int = 0  # its place among its cell's measured runs (``PlannedRun.rep``): its boot, with the session's design

    @property
    def order(self) -> int:
        """Position in time across sessions (session, then plan position)."""
        return self.session * ORDER_STRIDE + self.seq


@dataclass(frozen=True)
class Dataset:
    """The stored runs of one experiment: as columns (``table``, ``samples``) and, built when asked, as objects."""

    experiment: str  # experiment name
    sessions: tuple[Session, ...]  # oldest first
    runs: Sequence[RunInfo]  # counted runs, in time order (a view of ``table`` when loaded)
    values: Mapping[int, dict[str, float]]  # run id -> metric -> value (a view of ``samples`` when loaded)
    excluded: dict[int, dict[str, str]]  # run id -> metric -> why unusable in that run
    meta: dict[tuple[str, str], Metric]  # (workload, metric) -> how it was reported
    profiles: dict[int, dict[str, float]] = field(default_factory=dict)  # run id -> profile key -> share %
    table: RunTable | None = field(default=None, compare=False, repr=False)  # the runs as columns (derived)
    samples: dict[str, Samples] | None = field(default=None, compare=False, repr=False)  # metric -> values by row

    def __post_init__(self):
        """Columns from objects when built from objects (a simulation, a copy with runs replaced)."""
        table = self.runs.table if isinstance(self.runs, RunsView) else _table(tuple(self.runs))
        if isinstance(self.values, ValuesView) and self.values.table is table:
            samples = self.values.samples
        else:
            samples = _samples(table, self.values)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "samples", samples)

    @classmethod
    def of_columns(cls, experiment: str, sessions: tuple[Session, ...], table: RunTable,
                   samples: dict[str, Samples], excluded: dict[int, dict[str, str]],
                   meta: dict[tuple[str, str], Metric], profiles: dict | None = None) -> "Dataset":
        """A dataset of columns (``Store.load``); ``runs`` and ``values`` are built from them only if read."""
        return cls(experiment, tuple(sessions), RunsView(table), ValuesView(table, samples), excluded, meta,
                   dict(profiles or {}))

    def measured(self) -> list[RunInfo]:
        """Successful non-warm-up runs."""
        return [r for r in self.runs if not r.warmup and r.status == "ok"]

    @cached_property
    def session_by_id(self) -> dict[int, Session]:
        """The sessions by id."""
        return {s.id: s for s in self.sessions}

    def excluded_mask(self, rows, metric: str):
        """Mask of the table ``rows`` whose run excluded ``metric`` (exclusions are few: looked up by run id)."""
        import numpy as np

        ids = [rid for rid, per in self.excluded.items() if metric in per]
        if not ids:
            return np.zeros(len(rows), dtype=bool)
        return np.isin(self.table.run_id[rows], np.array(ids, dtype=np.int64))

    def of_sessions(self, ids: set[int]) -> "Dataset":
        """The sessions ``ids`` and their runs only."""
        import numpy as np

        from perfab.store.columns import Samples

        keep = np.isin(self.table.session, np.array(sorted(ids), dtype=np.int64))
        new_row = np.cumsum(keep) - 1
        samples = {}
        for metric, s in self.samples.items():
            mine = keep[s.rows]
            if mine.any():
                samples[metric] = Samples(new_row[s.rows[mine]], s.values[mine])
        run_ids = set(self.table.run_id[keep].tolist())
        pick = lambda d: {k: v for k, v in d.items() if k in run_ids}  # noqa: E731
        return Dataset.of_columns(self.experiment, tuple(s for s in self.sessions if s.id in ids),
                                  self.table.take(keep), samples, pick(self.excluded), self.meta,
                                  pick(self.profiles))


class RunsView(Sequence):
    """The rows of a RunTable as ``RunInfo`` objects, built on first use (about 1 KB a run)."""

    def __init__(self, table: RunTable):
        self.table = table
        self._runs: tuple[RunInfo, ...] | None = None

    def _all(self) -> tuple[RunInfo, ...]:
        if self._runs is None:
            self._runs = tuple(RunInfo(*self.table.row(i)) for i in range(len(self.table)))
        return self._runs

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return repr(self._all())


class ValuesView(Mapping):
    """run id -> metric -> value of columns, built on first use (metrics of a run in name order)."""

    def __init__(self, table: RunTable, samples: dict[str, Samples]):
        self.table, self.samples = table, samples
        self._values: dict[int, dict[str, float]] | None = None

    def _all(self) -> dict[int, dict[str, float]]:
        if self._values is None:
            out: dict[int, dict[str, float]] = defaultdict(dict)
            ids = self.table.run_id
            for metric, s in self.samples.items():
                for rid, v in zip(ids[s.rows].tolist(), s.values.tolist()):
                    out[rid][metric] = v
            self._values = {rid: out[rid] for rid in ids.tolist() if rid in out}
        return self._values

    def __getitem__(self, rid: int) -> dict[str, float]:
        return self._all()[rid]

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


def _samples(table: RunTable, values: Mapping[int, dict[str, float]]) -> dict[str, Samples]:
    """Columns of run id -> metric -> value; metrics in first-seen order, runs the table lacks left out."""
    import numpy as np

    from perfab.store.columns import Samples

    row = {rid: i for i, rid in enumerate(table.run_id.tolist())}
    cells: dict[str, tuple[list, list]] = {}
    for rid, per in values.items():
        for metric, value in per.items():
            if rid in row:
                cells.setdefault(metric, ([], []))[0].append(row[rid])
                cells[metric][1].append(value)
    out = {}
    for metric, (rows, vals) in cells.items():
        at = np.array(rows, dtype=np.int64)
        order = np.argsort(at, kind="stable")
        out[metric] = Samples(at[order], np.array(vals, dtype=float)[order])
    return out


def _table(runs: tuple[RunInfo, ...]) -> RunTable:
    """The columns of run objects."""
    import numpy as np

    from perfab.store.columns import Coded, RunTable

    def coded(values: list) -> Coded:
        levels: dict = {}
        return Coded(np.array([levels.setdefault(v, len(levels)) for v in values], dtype=np.int32),
                     tuple(levels))

    def ints(name: str) -> np.ndarray:
        return np.array([getattr(r, name) for r in runs], dtype=np.int64)

    return RunTable(ints("run_id"), ints("session"), ints("seq"), ints("attempt"),
                    coded([r.workload for r in runs]), coded([r.variant for r in runs]),
                    coded([r.params for r in runs]), ints("group"),
                    np.array([r.warmup for r in runs], dtype=bool), ints("block"),
                    np.array([r.started_at for r in runs], dtype=np.float64), coded([r.status for r in runs]),
                    coded([r.reason for r in runs]), coded([r.notes for r in runs]), ints("rep"))


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
