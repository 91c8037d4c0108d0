"""How many bytes a results store spends per stored run, table by table (SQLite or PostgreSQL).

``python -m perfab.store.footprint --db PATH_OR_URL`` prints each table's
size on disk (SQLite: its pages, by ``dbstat``; PostgreSQL: the table with
its indexes and TOAST, by ``pg_total_relation_size``), the number of runs
and samples, and the bytes per run: the figure to extrapolate a fleet's
database from.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from perfab.store import open_store

TABLES = ("experiments", "sessions", "planned_runs", "runs", "samples", "exclusions", "metric_meta",
          "profile_shares", "migrations")


@dataclass(frozen=True)
class Footprint:
    """A store's size on disk."""

    tables: dict[str, int]  # table -> bytes with its indexes (and TOAST on PostgreSQL)
    runs: int  # stored runs (every attempt)
    samples: int  # stored samples
    output_bytes: int  # bytes of stdout and stderr kept verbatim (before any compression)

    @property
    def total(self) -> int:
        return sum(self.tables.values())

    def per_run(self) -> float:
        return self.total / self.runs if self.runs else 0.0


def footprint(store) -> Footprint:
    """The footprint of an open store (``perfab.store.open_store``)."""
    db = store.db
    runs, output = db.execute("SELECT count(*), coalesce(sum(coalesce(length(stdout), 0) + "
                              "coalesce(length(stderr), 0)), 0) FROM runs").fetchone()
    samples = db.execute("SELECT count(*) FROM samples").fetchone()[0]
    return Footprint(_tables(store), runs, samples, output)


def _tables(store) -> dict[str, int]:
    if hasattr(store.db, "execute_raw"):  # PostgreSQL
        rows = store.db.execute_raw("SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                                    "WHERE n.nspname = 'perfab' AND c.relkind = 'r'").fetchall()
        return {name: size for name, size in rows if name in TABLES}
    rows = store.db.execute("SELECT m.tbl_name, sum(d.pgsize) FROM dbstat d JOIN sqlite_master m "
                            "ON m.name = d.name GROUP BY m.tbl_name").fetchall()
    return {name: size for name, size in rows if name in TABLES}


def describe(fp: Footprint) -> list[str]:
    lines = [f"{name:<16} {size:>14,} bytes" for name, size in sorted(fp.tables.items(), key=lambda t: -t[1])]
    lines.append(f"{'total':<16} {fp.total:>14,} bytes")
    lines.append(f"runs {fp.runs:,}; samples {fp.samples:,} ({fp.samples / max(fp.runs, 1):.1f} per run); "
                 f"verbatim output {fp.output_bytes:,} bytes ({fp.output_bytes / max(fp.runs, 1):,.0f} per run)")
    lines.append(f"bytes per run: {fp.per_run():,.0f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perfab.store.footprint", description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, help="a results file or a postgresql:// URL")
    args = p.parse_args(argv)
    with open_store(args.db, readonly=True) as store:
        print("\n".join(describe(footprint(store))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
