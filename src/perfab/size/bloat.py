"""bloat-o-meter's table as a value, and its text byte for byte; no numpy.

``compat`` computes the tables from numpy views of ``.symtab``;
``quick`` from the compiled reader's counts (``table_from_counts``).
Both format them here, so the two paths print the same text.
"""

from __future__ import annotations

from dataclasses import dataclass

FORMATS = {"all": "tTdDbBrR", "text": "tT", "data": "dDbB", "rodata": "rR", "data+rodata": "dDbBrR"}
TITLES = {"all": "Function", "text": "Function", "data": "Data", "rodata": "RO Data", "data+rodata": "Data"}


@dataclass(frozen=True)
class SymbolTable:
    """One bloat-o-meter-style table: its counts, rows and totals."""

    title: str  # first column header: "Function", "Data" or "RO Data"
    add: int  # names only in the new file
    remove: int  # names only in the old file
    grow: int  # common names that grew
    shrink: int  # common names that shrank
    up_bytes: int  # bytes added by new and grown names
    down_bytes: int  # bytes removed by removed and shrunk names (positive)
    rows: tuple[tuple[str, int | None, int | None, int], ...]  # (name, old, new, delta), bloat-o-meter order
    old_total_bytes: int  # sum of all kept sizes in the old file
    new_total_bytes: int  # sum of all kept sizes in the new file


def table_from_counts(title: str, counts: tuple) -> SymbolTable:
    """A table from the compiled reader's counts and unordered changed rows (``perfab_native.nm_diff``).

    Rows are ordered as bloat-o-meter orders them: by (delta, name), largest first.
    """
    add, remove, grow, shrink, up, down, old_total, new_total, changed = counts
    rows = [(name.decode("utf-8", "surrogateescape"), o, n, (n or 0) - (o or 0)) for name, o, n in changed]
    rows.sort(key=lambda r: (r[3], r[0]), reverse=True)
    return SymbolTable(title, add, remove, grow, shrink, up, down, tuple(rows), old_total, new_total)


def header_line(r: SymbolTable) -> str:
    """``add/remove: a/r grow/shrink: g/s up/down: u/-d (net)``."""
    return (
        f"add/remove: {r.add}/{r.remove} grow/shrink: {r.grow}/{r.shrink} "
        f"up/down: {r.up_bytes}/{-r.down_bytes} ({r.up_bytes - r.down_bytes})"
    )


def total_line(old_total: int, new_total: int) -> str:
    """``Total: Before=..., After=..., chg +0.14%``."""
    percent = (new_total - old_total) * 100.0 / old_total if old_total else 0.0
    return f"Total: Before={old_total}, After={new_total}, chg {percent:+.2f}%"


def row_line(name: str, old: int | None, new: int | None, delta: int) -> str:
    """One bloat-o-meter row: name, old, new, signed delta."""
    o = "-" if old is None else str(old)
    n = "-" if new is None else str(new)
    return f"{name:<40} {o:>7} {n:>7} {delta:+7d}"


def format_compat(results: list[SymbolTable]) -> str:
    """The text bloat-o-meter prints for these tables, byte for byte."""
    lines = []
    for r in results:
        lines.append(header_line(r))
        lines.append(f"{r.title:<40} {'old':>7} {'new':>7} {'delta':>7}")
        lines.extend(row_line(*row) for row in r.rows)
        lines.append(total_line(r.old_total_bytes, r.new_total_bytes))
    return "\n".join(lines) + "\n"
