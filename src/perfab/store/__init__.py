"""Stage 4: the results store.

``Store`` (SQLite, ``perfab.store.sqlite``) writes every run the moment it
ends; its read side (``perfab.store.reader``) reads an experiment back as a
``Dataset`` (``perfab.store.dataset``) whose runs and samples are numpy
columns (``perfab.store.columns``); the schema and its history are in
``perfab.store.schema``, session claims in ``perfab.store.claims`` and
``perfab.store.owner``.  ``PostgresStore`` (``perfab.store.postgres``) is the
same store on a PostgreSQL server, shared by a fleet of machines; both
implement ``ResultStore`` (``perfab.store.protocol``), and ``open_store``
picks one by the shape of ``--db``: a ``postgresql://`` URL or a file path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfab.errors import UsageError
from perfab.store.dataset import Dataset, Params, RunInfo, Session
from perfab.store.protocol import ResultStore
from perfab.store.record import RunRecord
from perfab.store.schema import SCHEMA_VERSION
from perfab.store.sqlite import Store

__all__ = ["Dataset", "Params", "ResultStore", "Results", "RunInfo", "RunRecord", "SCHEMA_VERSION",
           "Session", "Store", "is_postgres_url", "open_results", "open_store"]


def is_postgres_url(db: object) -> bool:
    """``db`` names a PostgreSQL database (``postgresql://...``) rather than a SQLite file."""
    return isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))


def open_store(db: str | Path, create: bool = True, readonly: bool = False,
               machine: str | None = None) -> ResultStore:
    """The store ``db`` names: a PostgreSQL URL or a SQLite file; ``machine`` is who this store acts for."""
    if is_postgres_url(db):
        from perfab.store.postgres import PostgresStore

        return PostgresStore(str(db), create=create, readonly=readonly, machine=machine)
    return Store(db, create=create, readonly=readonly, machine=machine)


@dataclass(frozen=True)
class Results:
    """The runs and samples of one experiment, for notebooks (``perfab.load``)."""

    experiment: str  # experiment name
    runs: list[dict]  # one dict per counted run (see Store.run_rows)
    samples: list[dict]  # one dict per (run, metric, value), with workload, variant and sweep parameters

    def to_pandas(self):
        """Samples joined with their runs as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas as pd
        except ImportError:
            raise UsageError("to_pandas() needs pandas; pip install pandas") from None
        return pd.DataFrame(self.samples)


def open_results(db: str, experiment: str | None = None) -> Results:
    """Load an experiment's runs and samples from ``db`` (the newest experiment by default), read-only."""
    with open_store(db, readonly=True) as store:
        name = experiment or store.latest_experiment()
        data = store.load(name)
        runs = store.run_rows(name)
        by_id = {r.run_id: r for r in data.runs}
        samples = [{"run_id": rid, "workload": by_id[rid].workload, "variant": by_id[rid].variant,
                    **dict(by_id[rid].params), "seq": by_id[rid].seq, "warmup": by_id[rid].warmup,
                    "metric": m, "value": v}
                   for rid, values in sorted(data.values.items()) for m, v in values.items()]
        return Results(name, runs, samples)
