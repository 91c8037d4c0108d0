"""perfab's own symbol rules: what a symbol is, what it is keyed by, what it covers.

Unlike bloat-o-meter (``compat``), a symbol here is any sized, defined,
allocated symbol, weak and IFUNC ones included, and:

- aliases (same section, address and size) count once, under one name
  chosen by binding (global, weak, local), then type, then the plainest name;
- a local symbol is keyed by its name *and* the source file of the STT_FILE
  symbol before it, so two ``static int helper`` in two files stay apart;
- ``.NUMBER`` suffixes (``__func__.3``, ``foo.isra.0``) are stripped from
  the key, and so is the counter of the kernel's ``__UNIQUE_ID_ddebug384``,
  since they change from build to build; sizes under one key add up.

Each section is also measured: the bytes its symbols cover (union of their
ranges) and the bytes no symbol covers, for the accounting check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from perfab.size import elf as E
from perfab.size import keys as K

NUMBER_RE = re.compile(r"\.[0-9]+")
KINDS = ("text", "rodata", "data", "bss")
_REL_GROUPS = (".text", ".rodata", ".data.rel.ro", ".data", ".bss", ".tdata", ".tbss", ".sdata", ".sbss")

Key = tuple[str, "str | None"]  # (name with .NUMBER stripped, source file for locals)


@dataclass(frozen=True)
class SectionUse:
    """How much of one section (or group of ET_REL sections) symbols cover."""

    name: str  # section name; ET_REL's ".text.foo" counts as ".text"
    kind: str  # "text", "rodata", "data" or "bss"
    size_bytes: int  # sh_size summed over the group
    symbol_bytes: int  # sizes of the symbols in it, aliases once
    covered_bytes: int  # union of the symbols' ranges, clipped to the section


@dataclass(frozen=True)
class SymbolSet:
    """One file's kept symbols under perfab's rules, as parallel arrays (aliases once)."""

    elf: E.ElfFile  # the file; names are decoded from it only for the keys a report shows
    index: np.ndarray  # .symtab positions of the kept symbols
    key: np.ndarray  # uint64 hash of (name without .NUMBER, source file of a local)
    name_hash: np.ndarray  # uint64 hash of the name without .NUMBER
    head_hash: np.ndarray  # uint64 hash of the family-base candidate (``keys.name_hashes``)
    size: np.ndarray  # int64 bytes
    kind: np.ndarray  # uint8 position in KINDS
    aliases: dict[str, tuple[str, ...]]  # kept name -> the other names at the same address
    sections: tuple[SectionUse, ...]  # allocated sections, in file order

    def label(self, j: int) -> Key:
        """(name without .NUMBER, source file) of kept symbol ``j``."""
        i = int(self.index[j])
        return (strip_name(self.elf.symbols.name(i)), self.elf.symbols.file_of(i))

    def sizes(self) -> dict[Key, int]:
        """Key -> bytes for every kept symbol (keys sharing a name add up); slow, for small files."""
        out: dict[Key, int] = {}
        for j, size in enumerate(self.size.tolist()):
            key = self.label(j)
            out[key] = out.get(key, 0) + size
        return out


def strip_name(name: str) -> str:
    """The key name: every ``.NUMBER`` removed, and the counter of ``__UNIQUE_ID_<prefix><N>``."""
    if "." in name:
        name = NUMBER_RE.sub("", name)
    if name.startswith(K.UNIQUE_ID):
        name = name[: len(K.UNIQUE_ID)] + name[len(K.UNIQUE_ID) :].rstrip("0123456789")
    return name


def section_kind(s: E.Section) -> str | None:
    """The size(1)-like bucket of an allocated section; None if not allocated."""
    if not s.alloc:
        return None
    if s.flags & E.SHF_EXECINSTR:
        return "text"
    if s.type == E.SHT_NOBITS:
        return "bss"
    if s.name == ".rodata" or s.name.startswith(".rodata."):
        return "rodata"  # by name: vmlinux's .rodata is writable until mark_rodata_ro()
    return "data" if s.flags & E.SHF_WRITE else "rodata"


def group_name(name: str, relocatable: bool) -> str:
    """The output section an ET_REL input section lands in (``.text.foo`` -> ``.text``)."""
    if not relocatable:
        return name
    for g in _REL_GROUPS:
        if name == g or name.startswith(g + "."):
            return g
    return name


def read_symbols(f: E.ElfFile) -> SymbolSet:
    """Keys, sizes and kinds of the kept symbols of ``f``, and each section's coverage."""
    kinds = [section_kind(s) for s in f.sections]
    idx = _candidates(f, kinds)
    idx, aliases = _dedupe_aliases(f, idx)
    s = f.symbols
    if s is None:
        z = np.zeros(0, dtype=np.uint64)
        return SymbolSet(f, idx, z, z, z, np.zeros(0, np.int64), np.zeros(0, np.uint8), aliases,
                         _section_uses(f, kinds, idx))
    owner = s.file_owner[idx]
    has_file = owner >= 0
    both = K.name_hashes(s.strtab, np.concatenate((s.name_offset[idx], s.name_offset[owner[has_file]])))
    n = len(idx)
    hashes = K.NameHashes(both.name[:n], both.head[:n], both.odd[:n])
    name_hash, head_hash = _fix_odd(s, idx, hashes)
    file_hash = np.zeros(n, dtype=np.uint64)
    file_hash[has_file] = both.name[n:]
    kind_code = np.array([KINDS.index(k) if k else 3 for k in kinds] + [3], dtype=np.uint8)
    kind = kind_code[np.where(s.shndx[idx] < len(kinds), s.shndx[idx], len(kinds))]
    return SymbolSet(
        f, idx, K.combine(name_hash, file_hash), name_hash, head_hash,
        s.size[idx].astype(np.int64), kind, aliases, _section_uses(f, kinds, idx),
    )


def _fix_odd(s: E.ElfSymbols, idx: np.ndarray, hashes: K.NameHashes) -> tuple[np.ndarray, np.ndarray]:
    """Hash by hand the rare names that start inside a longer string's .NUMBER run."""
    name, head = hashes.name.copy(), hashes.head.copy()
    for j in np.flatnonzero(hashes.odd).tolist():
        stem = stripped = strip_name(s.name(int(idx[j])))
        if stem.startswith(("__pfx_", "__cfi_")) and len(stem) > 6:
            stem = stem[6:]
        name[j], head[j] = K.hash_str(stripped), K.hash_str(stem.split(".")[0])
    return name, head


def _candidates(f: E.ElfFile, kinds: list[str | None]) -> np.ndarray:
    s = f.symbols
    if s is None:
        return np.zeros(0, dtype=np.int64)
    allocated = np.array([k is not None for k in kinds] + [False], dtype=bool)
    ndx = np.where(s.shndx < len(kinds), s.shndx, len(kinds))
    keep = (s.size != 0) & (s.type != E.STT_SECTION) & (s.type != E.STT_FILE)
    keep &= allocated[ndx] | (s.shndx == E.SHN_COMMON)
    return np.flatnonzero(keep)


def _dedupe_aliases(f: E.ElfFile, idx: np.ndarray) -> tuple[np.ndarray, dict[str, tuple[str, ...]]]:
    """Keep one symbol per (section, address, size); map its name to the others'."""
    s = f.symbols
    if s is None or len(idx) < 2:
        return idx, {}
    value = s.value[idx]
    by_value = np.sort(value)
    shared = np.unique(by_value[1:][by_value[1:] == by_value[:-1]])  # addresses held by 2+ symbols
    cand = idx[np.isin(value, shared)] if len(shared) else idx[:0]
    order = np.lexsort((s.size[cand], s.value[cand], s.shndx[cand]))
    si = cand[order]
    same = (s.shndx[si][1:] == s.shndx[si][:-1]) & (s.value[si][1:] == s.value[si][:-1])
    same &= (s.size[si][1:] == s.size[si][:-1]) & (s.shndx[si][1:] != E.SHN_COMMON)
    if not same.any():
        return idx, {}
    bounds = np.append(np.flatnonzero(np.concatenate(([True], ~same))), len(si))
    keep = np.ones(len(s.value), dtype=bool)
    aliases = {}
    for g in np.flatnonzero(np.diff(bounds) > 1).tolist():
        group = si[bounds[g] : bounds[g + 1]].tolist()
        group.sort(key=lambda i: _alias_rank(s, i))
        aliases[s.name(group[0])] = tuple(s.name(i) for i in group[1:])
        keep[group[1:]] = False
    return idx[keep[idx]], aliases


def _alias_rank(s: E.ElfSymbols, i: int) -> tuple:
    bind = {E.STB_GLOBAL: 0, E.STB_WEAK: 1}.get(int(s.bind[i]), 2)
    typed = 0 if int(s.type[i]) in (E.STT_FUNC, E.STT_OBJECT, E.STT_TLS, E.STT_GNU_IFUNC) else 1
    name = s.name(i)
    return (bind, typed, "." in name, name.startswith("__"), len(name), name)


def _section_uses(f: E.ElfFile, kinds: list[str | None], idx: np.ndarray) -> tuple[SectionUse, ...]:
    s = f.symbols
    n = len(f.sections)
    sym_bytes = np.zeros(n + 1, dtype=np.int64)
    covered = np.zeros(n + 1, dtype=np.int64)
    if s is not None and len(idx):
        ndx = s.shndx[idx].astype(np.int64)
        inside = ndx < n
        ndx, sel = ndx[inside], idx[inside]
        np.add.at(sym_bytes, ndx, s.size[sel].astype(np.int64))
        covered = _covered(f, ndx, sel, n)
    return _group_uses(f, kinds, sym_bytes, covered)


def _covered(f: E.ElfFile, ndx: np.ndarray, sel: np.ndarray, n: int) -> np.ndarray:
    """Per section index: bytes in the union of symbol ranges, each range clipped to its section.

    Addresses stay uint64 (a symbol may sit anywhere in the 64-bit space) and
    offsets within a section fit int64 (``elf`` keeps sizes below 2**63).
    Ranges are swept in (section, start) order; each gains the bytes past the
    furthest end seen before it in its own section.
    """
    out = np.zeros(n + 1, dtype=np.int64)
    if len(sel) == 0:
        return out
    s = f.symbols
    start, end = _offsets_in_section(
        s.value[sel], s.size[sel],
        np.array([sec.addr for sec in f.sections], dtype=np.uint64)[ndx],
        np.array([sec.size_bytes for sec in f.sections], dtype=np.uint64)[ndx],
    )
    order = np.lexsort((start, ndx))
    ndx, start, end = ndx[order], start[order], end[order]
    np.add.at(out, ndx, np.maximum(0, end - np.maximum(start, _furthest_before(ndx, end))))
    return out


def _offsets_in_section(
    value: np.ndarray, size: np.ndarray, base: np.ndarray, limit: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) of each symbol's range as offsets into its section, clipped to [0, limit).

    uint64 throughout and no sum can wrap: an offset is only added to a size
    already cut to what is left of the section.
    """
    above = value >= base
    off = np.where(above, value - base, 0)  # symbol starts inside or past the section
    before = np.where(above, 0, base - value)  # bytes of the symbol before the section starts
    start = np.minimum(off, limit)
    room = limit - start
    end = np.where(above, start + np.minimum(size, room), np.minimum(np.where(size > before, size - before, 0), limit))
    return start.astype(np.int64), end.astype(np.int64)


def _furthest_before(ndx: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each position of ``ndx``-sorted ranges: the largest ``end`` before it with the same ``ndx`` (0: none).

    The running maximum is taken over ranks of (ndx, end) pairs, so a section's
    ends never mix with another's and no key packing can overflow.
    """
    by_end = np.lexsort((end, ndx))
    rank = np.empty_like(by_end)
    rank[by_end] = np.arange(len(by_end))
    prev = np.concatenate(([-1], np.maximum.accumulate(rank)[:-1]))
    at = by_end[np.maximum(prev, 0)]
    return np.where((prev >= 0) & (ndx[at] == ndx), end[at], 0)


def _group_uses(f: E.ElfFile, kinds, sym_bytes: np.ndarray, covered: np.ndarray) -> tuple[SectionUse, ...]:
    relocatable = f.elf_type == "ET_REL"
    totals: dict[str, list[int]] = {}
    group_kind: dict[str, str] = {}
    for sec, kind in zip(f.sections, kinds):
        if kind is None:
            continue
        name = group_name(sec.name, relocatable)
        t = totals.setdefault(name, [0, 0, 0])
        t[0] += sec.size_bytes
        t[1] += int(sym_bytes[sec.index])
        t[2] += int(covered[sec.index])
        group_kind.setdefault(name, kind)
    return tuple(SectionUse(name, group_kind[name], *t) for name, t in totals.items())
