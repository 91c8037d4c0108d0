"""Diff two ELF files: bloat-o-meter's table, families with causes, accounting.

``diff_files`` reads both files once and returns a ``SizeDiff`` value; the
report module only formats it.  The steps:

1. symbols of each side (``symbols.read_symbols``, or bloat-o-meter's rules
   with ``compat=True``) -> the familiar add/remove table;
2. keys of both sides folded into families (``families``), each changed
   family given a cause (``causes``) from the inline sites of the changed
   families' functions when DWARF is present on both sides: the reader
   (``inline.read_function_index``) walks those functions and no other, so
   a vmlinux costs a fifth of its units and a few thousand of its 45,000
   functions, not the whole DWARF;
3. per section: old, new, the symbols' share and the bytes no symbol covers.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from perfab.errors import ToolError, UsageError
from perfab.size import compat as C
from perfab.size.causes import Cause, InlineView, explain
from perfab.size.elf import ElfFile, read_elf
from perfab.size.families import FamilyMember, assign_families, family_base
from perfab.size.keys import hash_str
from perfab.size.symbols import KINDS, SectionUse, SymbolSet, read_symbols
from perfab.size.target import check_targets

MODES = {"all": ("all",), "text": ("text",), "data+rodata": ("data+rodata",), "categories": ("text", "data", "rodata")}
_MODE_KINDS = {"all": KINDS, "text": ("text",), "data": ("data", "bss"), "rodata": ("rodata",),
               "data+rodata": ("data", "bss", "rodata")}


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
    old_inline_pct: float | None  # % of the changed functions' bytes inside DWARF inline ranges; None: no DWARF
    new_inline_pct: float | None  # same, new file


@dataclass(frozen=True)
class SizeDiff:
    """Everything ``perfab size OLD NEW`` reports."""

    old_path: str  # as given
    new_path: str  # as given
    compat: bool  # tables follow bloat-o-meter's rules exactly
    tables: tuple[C.SymbolTable, ...]  # bloat-o-meter-style tables (3 with categories)
    families: tuple[FamilyRow, ...]  # changed families, largest |delta| first (empty in compat mode)
    sections: tuple[SectionRow, ...]  # allocated sections of either file (empty in compat mode)
    coverage: Coverage | None  # None in compat mode
    inline_changes: str | None  # the inline reader's own listing of changed inline sites
    warnings: tuple[str, ...]  # what could not be done, and why
    mismatch: str | None = None  # how the two files' targets differ (``target.check_targets``); None: same target

    def kind_totals(self) -> dict[str, tuple[int, int]]:
        """size(1)-like totals: kind -> (old bytes, new bytes)."""
        out = {k: [0, 0] for k in KINDS}
        for s in self.sections:
            out[s.kind][0] += s.old_bytes
            out[s.kind][1] += s.new_bytes
        return {k: (v[0], v[1]) for k, v in out.items()}


def diff_files(
    old: str | Path, new: str | Path, *, compat: bool = False, mode: str = "all", dwarf: bool = True,
    allow_mismatch: bool = False,
) -> SizeDiff:
    """Diff ``old`` against ``new``; ``mode`` is all, text, data+rodata or categories.

    Files of another ELF class or byte order are refused unless ``allow_mismatch``;
    another machine is reported in ``SizeDiff.mismatch`` (``target``).
    """
    if mode not in MODES:
        raise UsageError(f"unknown size mode {mode!r}; use one of {', '.join(MODES)}")
    fo, fn = read_elf(old), read_elf(new)
    mismatch = check_targets(fo, fn, allow_mismatch)
    warnings = [f"{f.path}: no .symtab (stripped): no symbol is counted, as bloat-o-meter would"
                for f in (fo, fn) if f.symbols is None]
    if compat:
        tables = tuple(C.compat_results(fo, fn, mode))  # bloat-o-meter's tables only: no sections, no families
        return SizeDiff(str(old), str(new), True, tables, (), (), None, None, tuple(warnings), mismatch)
    for f in (fo, fn):
        if f.symbols is None:
            raise UsageError(f"{f.path}: no .symtab (stripped): nothing to compare symbol by symbol; "
                             "give unstripped builds (a -dbg vmlinux)")
    so, sn = read_symbols(fo), read_symbols(fn)
    joined = _join(so, sn, KINDS)
    tables = tuple(_table(so, sn, m, joined) for m in MODES[mode])
    groups = _family_groups(so, sn, joined, _MODE_KINDS[mode if mode != "categories" else "all"])
    chosen = _functions_of(groups, so), _functions_of(groups, sn)
    idx_old, idx_new, inline_changes, more = _inline_indexes(fo, fn, dwarf, chosen)
    families = _family_rows(groups, InlineView.of(idx_old), InlineView.of(idx_new))
    coverage = Coverage(_text_pct(so), _text_pct(sn), _inline_pct(idx_old), _inline_pct(idx_new))
    sections = _section_rows(so.sections, sn.sections)
    return SizeDiff(str(old), str(new), False, tables, families, sections, coverage, inline_changes,
                    tuple(warnings + more), mismatch)


@dataclass(frozen=True)
class _Joined:
    """Both files' symbols summed per key (sorted unique keys); -1 marks an absent side."""

    key: np.ndarray  # uint64 keys present in either file
    old: np.ndarray  # int64 bytes in the old file, -1: absent
    new: np.ndarray  # int64 bytes in the new file, -1: absent
    old_rep: np.ndarray  # a kept-symbol position in the old SymbolSet per key, -1: absent
    new_rep: np.ndarray  # same, new file
    labels: dict = field(default_factory=dict)  # key position -> (name, file), filled as keys are decoded

    @property
    def delta(self) -> np.ndarray:
        """new - old per key, absent counting as 0."""
        return np.maximum(self.new, 0) - np.maximum(self.old, 0)


def _join(so: SymbolSet, sn: SymbolSet, kinds) -> _Joined:
    codes = [KINDS.index(k) for k in kinds]
    per_side = [C.sums(np.arange(len(ss.key)), ss.key, ss.size, np.isin(ss.kind, codes)) for ss in (so, sn)]
    return _Joined(*C.join(*per_side))


def _label(j: _Joined, i: int, so: SymbolSet, sn: SymbolSet):
    """(name, file) of joined key ``i``, decoded once per key and remembered in ``j.labels``."""
    found = j.labels.get(i)
    if found is None:
        found = so.label(int(j.old_rep[i])) if j.old_rep[i] >= 0 else sn.label(int(j.new_rep[i]))
        j.labels[i] = found
    return found


def _name_hash(j: _Joined, so: SymbolSet, sn: SymbolSet, field: str = "name_hash") -> np.ndarray:
    a, b = getattr(so, field), getattr(sn, field)
    from_old = a[np.maximum(j.old_rep, 0)] if len(a) else 0
    from_new = b[np.maximum(j.new_rep, 0)] if len(b) else 0
    return np.where(j.old_rep >= 0, from_old, from_new)


def _table(so: SymbolSet, sn: SymbolSet, mode: str, joined: _Joined) -> C.SymbolTable:
    """bloat-o-meter's counts and rows over perfab's keys; only changed keys are decoded."""
    j = joined if _MODE_KINDS[mode] == KINDS else _join(so, sn, _MODE_KINDS[mode])
    hashes = _name_hash(j, so, sn)
    uniq, counts = np.unique(hashes, return_counts=True)
    shared = set(uniq[counts > 1].tolist())
    names = {}
    for i in np.flatnonzero(j.delta != 0).tolist():
        name, file = _label(j, i, so, sn)
        names[i] = f"{name} [{file}]" if file is not None and int(hashes[i]) in shared else name
    return C.count_table(C.TITLES[mode], j.old, j.new, names)


@dataclass(frozen=True)
class _Group:
    """One changed family before its cause is known."""

    fid: tuple  # (base name, file or None), as ``families.assign_families`` names it
    keys: list  # (name, file) of every member
    old: dict  # member key -> bytes in the old file
    new: dict  # member key -> bytes in the new file
    kind: str  # where its largest member lives
    hashes: np.ndarray  # uint64 symbol keys of its members (``SymbolSet.key``)


def _family_groups(so: SymbolSet, sn: SymbolSet, j: _Joined, kinds) -> list[_Group]:
    """The changed families of ``kinds``, causes not yet known; only the keys whose name or head hashes to a
    changed family's base are decoded."""
    changed = np.flatnonzero(j.delta != 0).tolist()
    bases = {family_base(_label(j, i, so, sn)[0]) for i in changed}
    wanted = np.array(sorted({hash_str(b) for b in bases}), dtype=np.uint64)
    hit = np.isin(_name_hash(j, so, sn), wanted) | np.isin(_name_hash(j, so, sn, "head_hash"), wanted)
    old_sizes, new_sizes, kind_of, hash_of = {}, {}, {}, defaultdict(list)
    for i in np.flatnonzero(hit).tolist():
        key = _label(j, i, so, sn)
        hash_of[key].append(int(j.key[i]))
        if j.old[i] >= 0:
            old_sizes[key] = old_sizes.get(key, 0) + int(j.old[i])
        if j.new[i] >= 0:
            new_sizes[key] = new_sizes.get(key, 0) + int(j.new[i])
        rep_kind = so.kind[j.old_rep[i]] if j.old_rep[i] >= 0 else sn.kind[j.new_rep[i]]
        kind_of[key] = KINDS[int(rep_kind)]
    changed_keys = {k for k, v in old_sizes.items() if new_sizes.get(k) != v} | (new_sizes.keys() - old_sizes.keys())
    fam_of = assign_families(set(old_sizes) | set(new_sizes))
    wanted_fids = {fam_of[k] for k in changed_keys}
    keys_of: dict = defaultdict(list)
    for key, fid in fam_of.items():
        if fid in wanted_fids:
            keys_of[fid].append(key)
    groups = []
    for fid, keys in keys_of.items():
        biggest = max(keys, key=lambda k: max(old_sizes.get(k, 0), new_sizes.get(k, 0)))
        if kind_of[biggest] in kinds:
            hashes = np.array([h for k in keys for h in hash_of[k]], dtype=np.uint64)
            groups.append(_Group(fid, keys, old_sizes, new_sizes, kind_of[biggest], hashes))
    return groups


def _functions_of(groups: list[_Group], ss: SymbolSet) -> np.ndarray:
    """``.symtab`` indices of the function symbols of ``ss`` that are members of ``groups``: the functions whose
    DWARF the causes read."""
    hashes = np.concatenate([g.hashes for g in groups]) if groups else np.zeros(0, dtype=np.uint64)
    mine = np.isin(ss.key, hashes) & (ss.kind == KINDS.index("text"))
    return ss.index[mine] + 1  # ElfSymbols drops the null symbol, which .symtab counts


def _family_rows(groups: list[_Group], vo, vn) -> tuple[FamilyRow, ...]:
    rows = [_family_row(g, vo, vn) for g in groups]
    rows.sort(key=lambda r: (-abs(r.delta_bytes), r.name, r.file or ""))
    return tuple(rows)


def _family_row(g: _Group, vo, vn) -> FamilyRow:
    members = sorted((FamilyMember(k[0], g.old.get(k), g.new.get(k)) for k in g.keys), key=_member_order)
    in_old = [m.old_bytes for m in members if m.old_bytes is not None]
    in_new = [m.new_bytes for m in members if m.new_bytes is not None]
    return FamilyRow(
        g.fid[0], g.fid[1], g.kind, sum(in_old) if in_old else None, sum(in_new) if in_new else None,
        tuple(members), explain(g.fid[0], members, vo, vn),
    )


def _member_order(m: FamilyMember) -> tuple:
    """By name; two members of one name (statics of two files) by their sizes, so the order never
    depends on set iteration (hash seeds): the one in the old file first."""
    return (m.name, m.old_bytes is None, m.old_bytes or 0, m.new_bytes is None, m.new_bytes or 0)


def _section_rows(uses_old, uses_new) -> tuple[SectionRow, ...]:
    uo = {u.name: u for u in uses_old}
    un = {u.name: u for u in uses_new}
    empty = SectionUse("", "", 0, 0, 0)
    rows = []
    for name in list(uo) + [n for n in un if n not in uo]:
        a, b = uo.get(name, empty), un.get(name, empty)
        rows.append(SectionRow(name, a.kind or b.kind, a.size_bytes, b.size_bytes, a.symbol_bytes, b.symbol_bytes,
                               a.covered_bytes, b.covered_bytes))
    return tuple(rows)


def _text_pct(s: SymbolSet) -> float:
    size = sum(u.size_bytes for u in s.sections if u.kind == "text")
    return 100.0 * sum(u.covered_bytes for u in s.sections if u.kind == "text") / size if size else 0.0


def _inline_pct(index) -> float | None:
    if index is None or not index.function_bytes:
        return None
    return 100.0 * index.covered_bytes / index.function_bytes


def _inline_indexes(fo: ElfFile, fn: ElfFile, dwarf: bool, chosen: tuple[np.ndarray, np.ndarray]):
    """(old index, new index, inline listing, warnings) over the ``chosen`` functions (``.symtab`` indices per
    file); indexes None where unavailable."""
    if not dwarf:
        return None, None, None, ["DWARF not read (--no-dwarf): causes come from symbols alone; "
                                  "inlining is not detected"]
    try:
        from perfab.size import inline
    except ImportError as err:
        return None, None, None, [f"inline causes unavailable: the DWARF reader could not be loaded ({err}); "
                                  "causes come from symbols alone"]
    warnings = [f"{f.path}: no debug info: inlined/uninlined causes unavailable; build with -g"
                for f in (fo, fn) if not f.has_debug_info]
    refused = {f.path: bomb for f in (fo, fn) if f.has_debug_info and (bomb := inflation_refused(f)) is not None}
    wanted = [(f.path, c) for f, c in zip((fo, fn), chosen) if f.has_debug_info and f.path not in refused]
    reads = _read_both(inline, wanted)
    indexes = []
    for f in (fo, fn):
        index = None
        if f.path in refused:
            warnings.append(refused[f.path])
            indexes.append(None)
            continue
        try:
            index = _raised(reads[f.path]) if f.has_debug_info else None
        except ToolError as err:
            return None, None, None, [f"inline causes unavailable: {err}"]
        except UsageError as err:  # damaged DWARF: the symbol diff does not need it, so that side has none
            warnings.append(f"inline causes unavailable: {err}")
        if index is not None and index.warnings:
            warnings.append(f"{f.path}: {len(index.warnings)} DWARF unit(s) unreadable ({index.warnings[0]}): "
                            "inline causes come from the other units only")
        indexes.append(index)
    io, ino = indexes
    listing = None
    if io is not None and ino is not None:
        listing = inline.format_inline_changes(inline.compare_inlines(io, ino))
    return io, ino, listing, warnings


def _read_both(inline, reads: list[tuple[str, np.ndarray]]) -> dict:
    """Read each file's chosen functions at once, the second in a thread of its own (the compiled reader runs
    without the GIL).  Path -> its index, or the exception reading it raised.  A plain thread: importing
    ``concurrent.futures`` (and ``logging`` with it) would cost 20 ms."""
    import threading

    results: dict = {}

    def read(path: str, chosen: np.ndarray) -> None:
        try:
            results[path] = inline.read_function_index(path, chosen)
        except Exception as err:  # noqa: BLE001 - handed to the caller, which raises it
            results[path] = err

    pending = list(dict(reads).items())  # a file diffed against itself is read once
    threads = [threading.Thread(target=read, args=item) for item in pending[1:]]
    for t in threads:
        t.start()
    if pending:
        read(*pending[0])
    for t in threads:
        t.join()
    return results


def _raised(result):
    """``result``, raised if it is an exception."""
    if isinstance(result, Exception):
        raise result
    return result


INFLATION_FACTOR = 100  # compressed DWARF inflates 3-10x in practice; zlib's worst case is about 1000x


def inflation_refused(f: ElfFile, available: int | None = None) -> str | None:
    """Why ``f``'s compressed sections are not inflated (a decompression bomb), or None.

    Their declared uncompressed size must stay within ``INFLATION_FACTOR`` times
    the file's size and half the memory this machine has available."""
    available = _available_bytes() if available is None else available
    limit = min(INFLATION_FACTOR * max(f.file_bytes, 1), available // 2)
    if f.inflated_bytes <= limit:
        return None
    return (f"{f.path}: compressed sections declare {_gib(f.inflated_bytes)} uncompressed, "
            f"{f.inflated_bytes // max(f.file_bytes, 1):,}x the file's {_gib(f.file_bytes)}, beyond the bound of "
            f"{_gib(limit)} ({INFLATION_FACTOR}x the file, at most half the available memory); its DWARF is not read: "
            "causes come from symbols alone")


def _available_bytes() -> int:
    """MemAvailable from /proc/meminfo (all of physical memory where it is not reported)."""
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
