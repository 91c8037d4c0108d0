"""An experiment's counted runs and samples as columns: one numpy array per field, not an object per run.

``RunTable`` holds the runs (time order: session, then plan position), a
text field as codes into its distinct values (``Coded``); ``Samples``
holds one metric's values with the table row of each.  ``read_runs`` and
``read_samples`` fill them from a query's rows, a chunk at a time, so a
million runs cost about 100 bytes each rather than a Python object with a
dict of floats (about 4 KB).
"""

from __future__ import annotations

import gc
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np

from perfab.plan import ORDER_STRIDE

CHUNK = 50_000  # rows fetched and converted at a time


@dataclass(frozen=True, eq=False)
class Coded:
    """A column of repeated values stored once: row i holds ``levels[codes[i]]``."""

    codes: np.ndarray  # int32, one per row: index into levels
    levels: tuple  # the distinct values, in first-seen order

    def __getitem__(self, i: int):
        return self.levels[self.codes[i]]

    def code(self, value) -> int:
        """The code of ``value``; -1 when no row holds it."""
        try:
            return self.levels.index(value)
        except ValueError:
            return -1

    def take(self, index: np.ndarray) -> "Coded":
        return Coded(self.codes[index], self.levels)


@dataclass(frozen=True, eq=False)
class RunTable:
    """The counted runs of an experiment (the newest attempt of each planned run), one array per field."""

    run_id: np.ndarray  # int64: id in the runs table
    session: np.ndarray  # int64: session id
    seq: np.ndarray  # int64: position in the session's plan
    attempt: np.ndarray  # int64: 1 for the first attempt
    workload: Coded  # workload name
    variant: Coded  # side name
    params: Coded  # sweep point (a Params tuple)
    group: np.ndarray  # int64: counter group index
    warmup: np.ndarray  # bool: an unmeasured warm-up run
    block: np.ndarray  # int64: interleaving block
    started_at: np.ndarray  # float64: unix time
    status: Coded  # ok | failed | interrupted
    reason: Coded  # why it failed (str) or None
    notes: Coded  # facts the backend reported (a tuple of str)
    rep: np.ndarray  # int64: place among its cell's measured runs (its boot, with the session's replication)

    def __len__(self) -> int:
        return len(self.run_id)

    @property
    def order(self) -> np.ndarray:
        """Position in time across sessions (``RunInfo.order``)."""
        return self.session * ORDER_STRIDE + self.seq

    def measured(self) -> np.ndarray:
        """Mask of the successful non-warm-up runs."""
        return ~self.warmup & (self.status.codes == self.status.code("ok"))

    def take(self, index: np.ndarray) -> "RunTable":
        """The rows ``index`` (a mask or positions), in that order."""
        kw = {f: getattr(self, f) for f in self.__dataclass_fields__}
        return RunTable(**{f: v.take(index) if isinstance(v, Coded) else v[index] for f, v in kw.items()})

    def side_key(self, rows: np.ndarray) -> np.ndarray:
        """One integer per (workload, point, variant) of each of ``rows``."""
        n_p, n_v = len(self.params.levels) or 1, len(self.variant.levels) or 1
        return (self.workload.codes[rows].astype(np.int64) * n_p + self.params.codes[rows]) * n_v \
            + self.variant.codes[rows]

    def row(self, i: int) -> tuple:
        """The fields of row ``i`` as Python values, in ``RunInfo``'s order."""
        return (int(self.run_id[i]), int(self.session[i]), int(self.seq[i]), int(self.attempt[i]),
                self.workload[i], self.variant[i], self.params[i], int(self.group[i]), bool(self.warmup[i]),
                int(self.block[i]), float(self.started_at[i]), self.status[i], self.reason[i], self.notes[i],
                int(self.rep[i]))


@dataclass(frozen=True, eq=False)
class Samples:
    """One metric's values: ``values[k]`` was measured in the run at table row ``rows[k]`` (rows ascending)."""

    rows: np.ndarray  # int64: rows of the RunTable
    values: np.ndarray  # float64: the stored values (nan where the store held something not a number)


def groups(key: np.ndarray) -> list[np.ndarray]:
    """The positions of each distinct key (keys ascending), each group in position order."""
    if len(key) == 0:
        return []
    by_key = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.diff(key[by_key], prepend=-1))
    return np.split(by_key, starts[1:])


_RUN_FIELDS = ("run_id", "session", "seq", "attempt", "workload", "variant", "params", "group", "warmup", "block",
               "started_at", "status", "reason", "notes", "rep")
_INTS = {"run_id", "session", "seq", "attempt", "group", "block", "rep"}


def read_runs(rows: Iterable[Sequence], params: Callable, notes: Callable) -> RunTable:
    """A RunTable of rows holding ``_RUN_FIELDS`` in order (params and notes as stored text, parsed by the
    callables once per distinct text)."""
    parts: dict[str, list] = {f: [] for f in _RUN_FIELDS}
    levels: dict[str, dict] = {f: {} for f in ("workload", "variant", "params", "status", "reason", "notes")}
    for chunk in _chunks(rows):
        for name, column in zip(_RUN_FIELDS, zip(*chunk)):
            if name in levels:
                seen = levels[name]
                parts[name].append(np.array([seen.setdefault(v, len(seen)) for v in column], dtype=np.int32))
            elif name == "warmup":
                parts[name].append(np.array(column, dtype=bool))
            else:
                parts[name].append(np.array(column, dtype=np.int64 if name in _INTS else np.float64))
    parse = {"params": params, "notes": notes}
    out = {}
    for name in _RUN_FIELDS:
        joined = np.concatenate(parts[name]) if parts[name] else np.zeros(0, dtype=_dtype(name))
        if name in levels:
            texts = tuple(levels[name])
            out[name] = Coded(joined, tuple(parse[name](t) for t in texts) if name in parse else texts)
        else:
            out[name] = joined
    return RunTable(**out)


def _dtype(name: str):
    if name in ("workload", "variant", "params", "status", "reason", "notes"):
        return np.int32
    return bool if name == "warmup" else np.int64 if name in _INTS else np.float64


def read_samples(rows: Iterable[Sequence], table: RunTable) -> dict[str, Samples]:
    """metric -> Samples from rows of (run id, metric, value); runs not in ``table`` (earlier attempts) are
    left out.  Each chunk is split by metric as it comes, so no more than the columns is ever held.
    Metrics come in name order."""
    sorter = np.argsort(table.run_id, kind="stable")
    ids = table.run_id[sorter]
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for chunk in _chunks(rows):
        rid, metric, value = zip(*chunk)
        row, counted = _rows_of(ids, sorter, np.array(rid, dtype=np.int64))
        values = _floats(value)
        seen: dict[str, int] = {}
        codes = np.array([seen.setdefault(m, len(seen)) for m in metric], dtype=np.int32)
        for name, code in seen.items():
            mine = (codes == code) & counted
            parts.setdefault(name, []).append((row[mine], values[mine]))
    out = {}
    for name in sorted(parts):
        got = parts.pop(name)
        at, values = np.concatenate([r for r, _ in got]), np.concatenate([v for _, v in got])
        if len(at):
            order = np.argsort(at, kind="stable")
            out[name] = Samples(at[order], values[order])
    return out


def _rows_of(ids: np.ndarray, sorter: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(table row of each wanted run id, mask of those the table holds); ``ids`` are the table's run ids
    sorted, ``sorter`` the rows in that order."""
    if len(ids) == 0:
        return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
    pos = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
    return sorter[pos], ids[pos] == wanted


def _floats(column: Sequence) -> np.ndarray:
    """Stored samples as floats: text another tool wrote into the REAL column ('nan', 'abc') is nan."""
    try:
        return np.array(column, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_number(v) for v in column], dtype=np.float64)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _chunks(rows) -> Iterable[list]:
    """The rows a chunk at a time (``fetchmany`` when the cursor has it).

    The cyclic garbage collector is paused meanwhile: a chunk is tens of thousands of fresh tuples, none
    in a cycle, and collecting them generation by generation cost up to half of the reading."""
    fetch = getattr(rows, "fetchmany", None)
    if fetch is None:
        rows = iter(rows)
        fetch = lambda n: [r for _, r in zip(range(n), rows)]  # noqa: E731
    was = gc.isenabled()
    gc.disable()
    try:
        while chunk := fetch(CHUNK):
            yield chunk
    finally:
        if was:
            gc.enable()


@lru_cache(maxsize=1024)
def notes_from_json(text: str | None) -> tuple[str, ...]:
    """A run's notes stored as JSON (most runs share "[]")."""
    return tuple(json.loads(text or "[]"))
