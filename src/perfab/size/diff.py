"""Diff two ELF files: bloat-o-meter's table, families with causes, accounting.

``diff_files`` reads both files once and returns a ``SizeDiff`` value; the
report module only formats it.  The steps:

1. symbols of each side (``symbols.read_symbols``, or bloat-o-meter's rules
   with ``compat=True``) -> the familiar add/remove table;
2. keys of both sides folded into families (``families``), each changed
   family given a cause (``causes``) from the inline indexes when DWARF is
   present on both sides;
3. per section: old, new, the symbols' share and the bytes no symbol covers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from perfab.errors import ToolError, UsageError
from perfab.size import compat as C
from perfab.size.causes import Cause, InlineView, explain
from perfab.size.elf import ElfFile, read_elf
from perfab.size.families import FamilyMember, assign_families
from perfab.size.symbols import KINDS, SectionUse, SymbolSet, read_symbols

MODES = {"all": ("all",), "text": ("text",), "data+rodata": ("data+rodata",), "categories": ("text", "data", "rodata")}
_MODE_KINDS = {"all": KINDS, "text": ("text",), "data": ("data", "bss"), "rodata": ("rodata",), "data+rodata": ("data", "bss", "rodata")}


@dataclass(frozen=True)
class FamilyRow:
    """One family that changed: its members, sizes and cause."""

    name: str  # the base name (``foo`` for ``foo.isra.0``)
    file: str | None  # source file, when needed to tell same-named statics apart
    kind: str  # "text", "rodata", "data" or "bss": where its largest member lives
    old_bytes: int | None  # summed over members; None: absent in the old file
    new_bytes: int | None  # summed over members; None: absent in the new file
    members: tuple[FamilyMember, ...]  # every member, unchanged ones included
    cause: Cause  # why it changed

    @property
    def delta_bytes(self) -> int:
        """new - old, absent counting as 0."""
        return (self.new_bytes or 0) - (self.old_bytes or 0)


@dataclass(frozen=True)
class SectionRow:
    """One allocated section on both sides, with what its symbols account for."""

    name: str  # section name (ET_REL input sections grouped: ".text.foo" -> ".text")
    kind: str  # "text", "rodata", "data" or "bss"
    old_bytes: int  # sh_size in the old file (0: absent)
    new_bytes: int  # sh_size in the new file (0: absent)
    old_symbol_bytes: int  # symbol sizes in it, aliases once
    new_symbol_bytes: int  # same, new file
    old_covered_bytes: int  # union of symbol ranges (overlaps once)
    new_covered_bytes: int  # same, new file

    @property
    def delta_bytes(self) -> int:
        """Section growth."""
        return self.new_bytes - self.old_bytes

    @property
    def symbol_delta_bytes(self) -> int:
        """Growth of the symbols' summed sizes."""
        return self.new_symbol_bytes - self.old_symbol_bytes

    @property
    def overlap_delta_bytes(self) -> int:
        """Growth of bytes counted twice by overlapping symbols (or lying past the section)."""
        return (self.new_symbol_bytes - self.new_covered_bytes) - (self.old_symbol_bytes - self.old_covered_bytes)

    @property
    def uncovered_delta_bytes(self) -> int:
        """Growth of the bytes no symbol covers (padding, asm without .size, tables)."""
        return (self.new_bytes - self.new_covered_bytes) - (self.old_bytes - self.old_covered_bytes)


@dataclass(frozen=True)
class Coverage:
    """How much of the code the symbols, and the inline ranges, account for."""

    old_text_pct: float  # % of executable-section bytes inside some function symbol, old file
    new_text_pct: float  # same, new file
    old_inline_pct: float | None  # % of function bytes inside DWARF inline ranges; None: no DWARF
    new_inline_pct: float | None  # same, new file


@dataclass(frozen=True)
class SizeDiff:
    """Everything ``perfab size OLD NEW`` reports."""

    old_path: str  # as given
    new_path: str  # as given
    compat: bool  # tables follow bloat-o-meter's rules exactly
    tables: tuple[C.SymbolTable, ...]  # bloat-o-meter-style tables (3 with categories)
    families: tuple[FamilyRow, ...]  # changed families, largest |delta| first (empty in compat mode)
    sections: tuple[SectionRow, ...]  # allocated sections of either file
    coverage: Coverage | None  # None in compat mode
    inline_changes: str | None  # the inline reader's own listing of changed inline sites
    warnings: tuple[str, ...]  # what could not be done, and why

    def kind_totals(self) -> dict[str, tuple[int, int]]:
        """size(1)-like totals: kind -> (old bytes, new bytes)."""
        out = {k: [0, 0] for k in KINDS}
        for s in self.sections:
            out[s.kind][0] += s.old_bytes
            out[s.kind][1] += s.new_bytes
        return {k: (v[0], v[1]) for k, v in out.items()}


def diff_files(old: str | Path, new: str | Path, *, compat: bool = False, mode: str = "all", dwarf: bool = True) -> SizeDiff:
    """Diff ``old`` against ``new``; ``mode`` is all, text, data+rodata or categories."""
    if mode not in MODES:
        raise UsageError(f"unknown size mode {mode!r}; use one of {', '.join(MODES)}")
    fo, fn = read_elf(old), read_elf(new)
    warnings = [f"{f.path}: no .symtab (stripped?): no symbol is counted; diff an unstripped build" for f in (fo, fn) if f.symbols is None]
    sections = _section_rows(fo, fn)
    if compat:
        return SizeDiff(str(old), str(new), True, tuple(C.compat_results(fo, fn, mode)), (), sections, None, None, tuple(warnings))
    so, sn = read_symbols(fo), read_symbols(fn)
    tables = tuple(_table(so, sn, m) for m in MODES[mode])
    idx_old, idx_new, inline_changes, more = _inline_indexes(fo, fn, dwarf)
    families = _families(so, sn, InlineView.of(idx_old), InlineView.of(idx_new), _MODE_KINDS[mode if mode != "categories" else "all"])
    coverage = Coverage(_text_pct(so), _text_pct(sn), _inline_pct(idx_old), _inline_pct(idx_new))
    return SizeDiff(str(old), str(new), False, tables, families, _section_rows(fo, fn, so, sn), coverage, inline_changes, tuple(warnings + more))


def display_names(keys) -> dict:
    """Key -> row name: the bare name, or ``name [file]`` where the bare name is ambiguous."""
    count: dict[str, int] = defaultdict(int)
    for name, _ in keys:
        count[name] += 1
    return {k: (k[0] if count[k[0]] == 1 or k[1] is None else f"{k[0]} [{k[1]}]") for k in keys}


def _table(so: SymbolSet, sn: SymbolSet, mode: str) -> C.SymbolTable:
    kinds = _MODE_KINDS[mode]
    names = display_names(set(so.sizes) | set(sn.sizes))
    old = {names[k]: v for k, v in so.sizes.items() if so.kinds[k] in kinds}
    new = {names[k]: v for k, v in sn.sizes.items() if sn.kinds[k] in kinds}
    return C.calc(old, new, C.TITLES[mode])


def _families(so: SymbolSet, sn: SymbolSet, vo, vn, kinds) -> tuple[FamilyRow, ...]:
    changed = {k for k, v in so.sizes.items() if sn.sizes.get(k) != v} | (sn.sizes.keys() - so.sizes.keys())
    fam_of = assign_families(set(so.sizes) | set(sn.sizes))
    wanted = {fam_of[k] for k in changed}
    keys_of: dict = defaultdict(list)
    for key, fid in fam_of.items():
        if fid in wanted:
            keys_of[fid].append(key)
    rows = [_family_row(fid, keys, so, sn, vo, vn) for fid, keys in keys_of.items()]
    rows = [r for r in rows if r.kind in kinds]
    rows.sort(key=lambda r: (-abs(r.delta_bytes), r.name, r.file or ""))
    return tuple(rows)


def _family_row(fid, keys, so: SymbolSet, sn: SymbolSet, vo, vn) -> FamilyRow:
    members = sorted((FamilyMember(k[0], so.sizes.get(k), sn.sizes.get(k)) for k in keys), key=lambda m: m.name)
    biggest = max(keys, key=lambda k: max(so.sizes.get(k, 0), sn.sizes.get(k, 0)))
    kind = so.kinds.get(biggest) or sn.kinds[biggest]
    old = sum(m.old_bytes for m in members if m.old_bytes is not None) if any(m.old_bytes is not None for m in members) else None
    new = sum(m.new_bytes for m in members if m.new_bytes is not None) if any(m.new_bytes is not None for m in members) else None
    return FamilyRow(fid[0], fid[1], kind, old, new, tuple(members), explain(fid[0], members, vo, vn))


def _section_rows(fo: ElfFile, fn: ElfFile, so: SymbolSet | None = None, sn: SymbolSet | None = None) -> tuple[SectionRow, ...]:
    uo = {u.name: u for u in (so or read_symbols(fo)).sections}
    un = {u.name: u for u in (sn or read_symbols(fn)).sections}
    empty = SectionUse("", "", 0, 0, 0)
    rows = []
    for name in list(uo) + [n for n in un if n not in uo]:
        a, b = uo.get(name, empty), un.get(name, empty)
        rows.append(SectionRow(name, a.kind or b.kind, a.size_bytes, b.size_bytes, a.symbol_bytes, b.symbol_bytes, a.covered_bytes, b.covered_bytes))
    return tuple(rows)


def _text_pct(s: SymbolSet) -> float:
    size = sum(u.size_bytes for u in s.sections if u.kind == "text")
    return 100.0 * sum(u.covered_bytes for u in s.sections if u.kind == "text") / size if size else 0.0


def _inline_pct(index) -> float | None:
    if index is None or not index.function_bytes:
        return None
    return 100.0 * index.covered_bytes / index.function_bytes


def _inline_indexes(fo: ElfFile, fn: ElfFile, dwarf: bool):
    """(old index, new index, inline listing, warnings); indexes None where unavailable."""
    if not dwarf:
        return None, None, None, ["DWARF not read (--no-dwarf): causes come from symbols alone; inlining is not detected"]
    try:
        from perfab.size import inline
    except ImportError as err:
        return None, None, None, [f"inline causes unavailable: the DWARF reader could not be loaded ({err}); causes come from symbols alone"]
    warnings = [f"{f.path}: no debug info: inlined/uninlined causes unavailable; build with -g" for f in (fo, fn) if not f.has_debug_info]
    try:
        io = inline.read_inline_index(fo.path) if fo.has_debug_info else None
        ino = inline.read_inline_index(fn.path) if fn.has_debug_info else None
    except ToolError as err:
        return None, None, None, [f"inline causes unavailable: {err}"]
    listing = inline.format_inline_changes(inline.compare_inlines(io, ino)) if io is not None and ino is not None else None
    return io, ino, listing, warnings
