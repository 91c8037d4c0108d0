"""Inline attribution: which inlined callee grew, at how many sites, where.

The compiled reader ``perfab_native.inline_sites`` walks the DWARF of an ELF
file (DWARF 4 and 5, compressed sections, vmlinux) and returns every concrete
function and every ``DW_TAG_inlined_subroutine`` as packed columns;
``function_sites`` does the same for chosen functions only (the size diff's
changed ones), reading no other part of the DWARF.  Each
code byte belongs to its innermost inline site: a site's exclusive bytes are
its address ranges minus its children's, its inclusive bytes are all of its
ranges.  This module keeps those columns, builds ``InlineSite`` values only
for the sites asked for, and compares two files per callee (counted by the
reader's ``compare_sites``), which answers "every ``_raw_spin_unlock``
call site grew by N bytes, across K sites" (seed 000) and "``copy_process``
now inlines ``copy_mm`` whole" (seed 001).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from pathlib import Path
from typing import NamedTuple

import numpy as np

from perfab.errors import ToolError, UsageError

TOP_CALLERS = 3  # callers kept per change, largest |delta| first


class InlineSite(NamedTuple):
    """One inlined call: a ``DW_TAG_inlined_subroutine`` in a concrete function.

    A site whose body folded into the surrounding code entirely (only
    ``DW_AT_entry_pc``, no ranges: a typical ``IS_ERR``) has 0 bytes.
    An immutable named tuple rather than a frozen dataclass: a vmlinux has
    ~300,000 sites, and a frozen dataclass's ``__init__`` cost a second there.
    """

    callee: str  # inlined function's name (DW_AT_name through abstract origins)
    caller: str  # concrete function holding the code (outermost subprogram with code)
    parent: str | None  # callee of the directly enclosing inline site; None at top level
    call_file: str  # DW_AT_call_file, relative to the build directory when below it
    call_line: int  # DW_AT_call_line (0: unknown)
    exclusive_bytes: int  # code bytes of this site not inside a nested inline site
    inclusive_bytes: int  # all code bytes of this site's ranges
    caller_symbol: str = ""  # ELF symbol at the caller's entry (e.g. "copy_process.isra.0")
    callee_linkage: str = ""  # callee's DW_AT_linkage_name (C++ mangled name), "" in C


class SiteColumns:
    """One file's inline sites as the reader's packed columns; ``InlineSite`` values built when first asked for.

    The diff compares two files per callee in the compiled reader
    (``compare_sites``) without building values; causes group them.
    """

    def __init__(self, data: dict):
        self.data = data  # the reader's dict: "strings" and little-endian u32/i32 columns
        self.strings: list[str] = data["strings"]
        self.callee = _array(data, "site_callee")
        func = _array(data, "site_func")
        self.caller = _array(data, "func_name")[func]  # string id of each site's function
        self.symbol = _array(data, "func_symbol")[func]  # string id of the ELF symbol at each site's function
        self.parent = _array(data, "site_parent", "<i4")  # enclosing site's position, -1 at top level
        self.rest = {key: _array(data, key)
                     for key in ("site_file", "site_line", "site_exclusive", "site_inclusive", "site_linkage")}

    def sites(self) -> list[InlineSite]:
        """Every site, in DWARF order."""
        return list(map(tuple.__new__, repeat(InlineSite), zip(*self._fields)))

    def sites_at(self, positions: list[int]) -> list[InlineSite]:
        """The sites at ``positions``, in that order."""
        f = self._fields
        return [InlineSite(f[0][i], f[1][i], f[2][i], f[3][i], f[4][i], f[5][i], f[6][i], f[7][i], f[8][i])
                for i in positions]

    @cached_property
    def _fields(self) -> tuple[list, ...]:
        """``InlineSite``'s fields as one list per field (string ids looked up by numpy over an object array)."""
        names, rest = np.array(self.strings, dtype=object), self.rest
        parent = names[self.callee[np.maximum(self.parent, 0)]] if len(self.parent) else names[:0]
        parent[self.parent < 0] = None
        return (names[self.callee].tolist(), names[self.caller].tolist(), parent.tolist(),
                names[rest["site_file"]].tolist(), rest["site_line"].tolist(), rest["site_exclusive"].tolist(),
                rest["site_inclusive"].tolist(), names[self.symbol].tolist(), names[rest["site_linkage"]].tolist())


def _array(data: dict, key: str, dtype: str = "<u4") -> np.ndarray:
    return np.frombuffer(data[key], dtype=dtype).astype(np.int64)


@dataclass(frozen=True)
class InlineIndex:
    """Every inline site of one file, with the code they cover."""

    given: tuple[InlineSite, ...] | None  # sites given as values; None: decoded from ``columns`` on first use
    covered_bytes: int  # code bytes inside some inline site's ranges
    function_bytes: int  # code bytes inside concrete functions' ranges
    functions: int = 0  # concrete functions seen
    dwarf_versions: tuple[int, ...] = ()  # unit versions present (4, 5)
    warnings: tuple[str, ...] = ()  # units that could not be read, one line each
    columns: SiteColumns | None = field(default=None, compare=False)  # the reader's columns; None: built from values

    @cached_property
    def sites(self) -> tuple[InlineSite, ...]:
        """Every site, in DWARF order."""
        return self.given if self.given is not None else tuple(self.columns.sites())

    def by_callee(self) -> dict[str, list[InlineSite]]:
        """Sites grouped by inlined function."""
        return _group(self.sites, "callee")

    def by_caller(self) -> dict[str, list[InlineSite]]:
        """Sites grouped by the concrete function holding them."""
        return _group(self.sites, "caller")


@dataclass(frozen=True)
class InlineChange:
    """How one callee's inlined copies changed between two files."""

    callee: str  # inlined function's name
    sites_old: int  # inline sites in the old file
    sites_new: int  # inline sites in the new file
    bytes_per_site_old: float  # inclusive bytes per site, old (0.0 without sites)
    bytes_per_site_new: float  # inclusive bytes per site, new
    exclusive_old: int  # exclusive bytes summed over old sites
    exclusive_new: int  # exclusive bytes summed over new sites
    inclusive_old: int  # inclusive bytes summed over old sites
    inclusive_new: int  # inclusive bytes summed over new sites
    top_callers: tuple[tuple[str, int], ...]  # (caller, inclusive delta bytes), largest |delta| first
    evidence: tuple[str, ...]  # e.g. "kernel/fork.c:2381 in copy_process", one per top caller

    @property
    def inclusive_delta(self) -> int:
        """Inclusive bytes gained (negative: lost)."""
        return self.inclusive_new - self.inclusive_old

    @property
    def sites_delta(self) -> int:
        """Inline sites gained (negative: lost)."""
        return self.sites_new - self.sites_old


def _group(sites: tuple[InlineSite, ...], key: str) -> dict[str, list[InlineSite]]:
    out: dict[str, list[InlineSite]] = defaultdict(list)
    for s in sites:
        out[getattr(s, key)].append(s)
    return dict(out)


def _native():
    try:
        import perfab_native
    except ImportError as err:
        raise ToolError(
            f"the DWARF reader perfab_native is not installed ({err}); "
            "build it with `.venv/bin/pip install ./native` (needs cargo)"
        ) from None
    return perfab_native


def read_inline_index(path: str | Path, threads: int = 0) -> InlineIndex | None:
    """The inline sites of the ELF file at ``path``; None when it has no DWARF.

    ``threads`` bounds the reader's parallelism over compile units (0: one
    per CPU).  Unreadable files raise ``UsageError``.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file; give the path of an ELF file")
    try:
        data = _native().inline_sites(str(path), threads)
    except ValueError as err:
        raise UsageError(f"{path}: {err}; give an ELF file built with -g") from None
    if data is None:
        return None
    if data["unit_errors"] and len(data["unit_errors"]) == data["units"]:
        raise UsageError(f"{path}: no readable DWARF unit ({data['unit_errors'][0]}); rebuild it with -g")
    return _index_from_columns(data)


def read_function_index(path: str | Path, symbols) -> InlineIndex | None:
    """The inline sites of the chosen functions of the ELF file at ``path``; None when it has no DWARF.

    ``symbols`` are ``.symtab`` indices (the null symbol is 0): the reader
    walks only the concrete functions whose code holds one of their
    addresses, in the units ``.debug_aranges`` names for them.  The index's
    byte counts and sites are those of these functions alone.  Unreadable
    files raise ``UsageError``.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file; give the path of an ELF file")
    try:
        data = _native().function_sites(str(path), [int(i) for i in symbols])
    except ValueError as err:
        raise UsageError(f"{path}: {err}; give an ELF file built with -g") from None
    if data is None:
        return None
    if data["unit_errors"] and len(data["unit_errors"]) >= data["units"]:
        raise UsageError(f"{path}: no readable DWARF unit ({data['unit_errors'][0]}); rebuild it with -g")
    return _index_from_columns(data)


def _index_from_columns(data: dict) -> InlineIndex:
    """The index over the reader's columns; its ``InlineSite`` values are built on first use."""
    return InlineIndex(
        given=None,
        covered_bytes=int(data["covered_bytes"]),
        function_bytes=int(data["function_bytes"]),
        functions=len(data["func_name"]) // 4,
        dwarf_versions=tuple(data["versions"]),
        warnings=tuple(data["unit_errors"]),
        columns=SiteColumns(data),
    )


@dataclass
class _Tally:
    """Per-callee sums over one file's sites (mutable while counting)."""

    sites: int = 0
    exclusive: int = 0
    inclusive: int = 0
    by_caller: dict[str, int] | None = None  # caller -> inclusive bytes
    example: dict[str, InlineSite] | None = None  # caller -> its largest site


def _tally(index: InlineIndex) -> dict[str, _Tally]:
    out: dict[str, _Tally] = {}
    for s in index.sites:
        t = out.get(s.callee)
        if t is None:
            t = out[s.callee] = _Tally(by_caller=defaultdict(int), example={})
        t.sites += 1
        t.exclusive += s.exclusive_bytes
        t.inclusive += s.inclusive_bytes
        t.by_caller[s.caller] += s.inclusive_bytes
        best = t.example.get(s.caller)
        if best is None or s.inclusive_bytes > best.inclusive_bytes:
            t.example[s.caller] = s
    return out


def compare_inlines(old: InlineIndex, new: InlineIndex) -> list[InlineChange]:
    """Per-callee changes of inline sites and bytes, largest |inclusive delta| first.

    Callees whose site count and byte sums are all equal are left out.
    Bytes per site are inclusive bytes over all sites, 0-byte sites included.
    Sites are matched by callee and caller name only (two static functions
    of the same name count as one; addresses and line numbers move between
    builds); inclusive bytes of nested sites count towards every enclosing
    callee as well.
    """
    if old.columns is not None and new.columns is not None:
        rows = _native().compare_sites(old.columns.data, new.columns.data, TOP_CALLERS)
        changes = [_native_change(*row) for row in rows]
        changes.sort(key=lambda c: (-abs(c.inclusive_delta), -abs(c.sites_delta), c.callee))
        return changes
    t_old, t_new = _tally(old), _tally(new)
    empty = _Tally(by_caller={}, example={})
    changes = []
    for callee in t_old.keys() | t_new.keys():
        a, b = t_old.get(callee, empty), t_new.get(callee, empty)
        if (a.sites, a.exclusive, a.inclusive) == (b.sites, b.exclusive, b.inclusive):
            continue
        changes.append(_change(callee, a, b))
    changes.sort(key=lambda c: (-abs(c.inclusive_delta), -abs(c.sites_delta), c.callee))
    return changes


def _native_change(callee, sites_old, sites_new, excl_old, excl_new, incl_old, incl_new, callers) -> InlineChange:
    """An ``InlineChange`` from one row of the compiled reader's ``compare_sites``."""
    return InlineChange(
        callee=callee,
        sites_old=sites_old,
        sites_new=sites_new,
        bytes_per_site_old=incl_old / sites_old if sites_old else 0.0,
        bytes_per_site_new=incl_new / sites_new if sites_new else 0.0,
        exclusive_old=excl_old,
        exclusive_new=excl_new,
        inclusive_old=incl_old,
        inclusive_new=incl_new,
        top_callers=tuple((caller, delta) for caller, delta, _, _ in callers),
        evidence=tuple(f"{file}:{line} in {caller}" for caller, _, file, line in callers),
    )


def _change(callee: str, a: _Tally, b: _Tally) -> InlineChange:
    deltas = {c: b.by_caller.get(c, 0) - a.by_caller.get(c, 0) for c in a.by_caller.keys() | b.by_caller.keys()}
    top = sorted(((c, d) for c, d in deltas.items() if d), key=lambda cd: (-abs(cd[1]), cd[0]))[:TOP_CALLERS]
    evidence = []
    for caller, delta in top:
        site = (b.example if delta > 0 else a.example).get(caller)
        if site is not None:
            evidence.append(f"{site.call_file}:{site.call_line} in {caller}")
    return InlineChange(
        callee=callee,
        sites_old=a.sites,
        sites_new=b.sites,
        bytes_per_site_old=a.inclusive / a.sites if a.sites else 0.0,
        bytes_per_site_new=b.inclusive / b.sites if b.sites else 0.0,
        exclusive_old=a.exclusive,
        exclusive_new=b.exclusive,
        inclusive_old=a.inclusive,
        inclusive_new=b.inclusive,
        top_callers=tuple(top),
        evidence=tuple(evidence),
    )


WIDTH = 80
_HEAD = f"{'inlined callee':<34}{'sites old':>10}{'new':>6}{'B/site old':>12}{'new':>7}{'delta':>11}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _row(c: InlineChange) -> list[str]:
    line = (
        f"{_fit(c.callee, 33):<34}{c.sites_old:>10}{c.sites_new:>6}"
        f"{c.bytes_per_site_old:>12.1f}{c.bytes_per_site_new:>7.1f}{c.inclusive_delta:>+11}"
    )
    rows = [line]
    if c.top_callers:
        caller, delta = c.top_callers[0]
        where = c.evidence[0] if c.evidence else caller
        rows.append(_fit(f"    {where} ({delta:+})", WIDTH))
    return rows


def format_inline_changes(changes: list[InlineChange], limit: int = 20) -> str:
    """Plain-text table of the first ``limit`` changes, at most 80 columns.

    Each row: callee, sites old/new, inclusive bytes per site old/new,
    inclusive delta; under it the largest caller change with its call site.
    The last line counts the rows cut and their summed delta.
    """
    if not changes:
        return "inline sites: no change\n"
    lines = [_HEAD, "-" * WIDTH]
    for c in changes[:limit]:
        lines.extend(_row(c))
    cut = changes[limit:]
    if cut:
        total = sum(c.inclusive_delta for c in cut)
        lines.append(f"({len(cut)} more changed callees not shown, inclusive delta {total:+} bytes)")
    return "\n".join(lines) + "\n"
