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

The names below are imported from their modules when first asked for (PEP
562), so a command that only lists a store (``perfab.store.listing``) loads
none of the typed values, as ``perfab.report`` does for its renderers.
"""

from __future__ import annotations

TYPE_CHECKING = False  # annotations only; never evaluated
if TYPE_CHECKING:
    from pathlib import Path

    from perfab.store.protocol import ResultStore

_LAZY = {  # name -> the module that defines it
    "Dataset": "dataset", "Params": "dataset", "RunInfo": "dataset", "Session": "dataset",
    "ResultStore": "protocol", "RunRecord": "record", "SCHEMA_VERSION": "schema", "Store": "sqlite",
    "Results": "results", "open_results": "results",
}

__all__ = ["Dataset", "Params", "ResultStore", "Results", "RunInfo", "RunRecord", "SCHEMA_VERSION",
           "Session", "Store", "is_postgres_url", "open_results", "open_store"]


def __getattr__(name: str):
    """A name of ``_LAZY``, imported from its module when first asked for (PEP 562)."""
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"perfab.store.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'perfab.store' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


def is_postgres_url(db: object) -> bool:
    """``db`` names a PostgreSQL database (``postgresql://...``) rather than a SQLite file."""
    return isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))


def open_store(db: "str | Path", create: bool = True, readonly: bool = False,
               machine: str | None = None) -> "ResultStore":
    """The store ``db`` names: a PostgreSQL URL or a SQLite file; ``machine`` is who this store acts for."""
    if is_postgres_url(db):
        from perfab.store.postgres import PostgresStore

        return PostgresStore(str(db), create=create, readonly=readonly, machine=machine)
    from perfab.store.sqlite import Store

    return Store(db, create=create, readonly=readonly, machine=machine)
