"""The kernel's ``scripts/bloat-o-meter``, reproduced from the symbol table.

bloat-o-meter runs ``nm --size-sort`` on each file and keeps symbols whose
type letter is in a set (``tTdDbBrR`` by default), drops a few generated
names, strips every ``.NUMBER`` from the rest and sums sizes per name.
Here the same letters are computed from ``.symtab`` the way GNU nm (BFD)
assigns them, so ``--compat`` gives the same numbers without running nm:

- ``nm --size-sort`` drops undefined, absolute, section and file symbols and
  symbols of size 0; the size is ``st_size``.
- Letters: COMMON ``C``, IFUNC ``i``, weak ``W``/``V``, GNU unique ``u``;
  otherwise by section: executable ``t``, allocated with contents ``d`` or
  ``r`` (read-only), without contents ``b``, debug ``N``, other read-only
  ``n``; upper case for global binding.
- nm lines containing ``:`` are skipped, so are such names here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from perfab.size import elf as E

NUMBER_RE = re.compile(r"\.[0-9]+")
SKIP_PREFIXES = ("__mod_", "__se_sys", "__se_compat_sys", "__addressable_")
SKIP_NAMES = ("linux_banner", "vermagic")
FORMATS = {"all": "tTdDbBrR", "text": "tT", "data": "dDbB", "rodata": "rR", "data+rodata": "dDbBrR"}
TITLES = {"all": "Function", "text": "Function", "data": "Data", "rodata": "RO Data", "data+rodata": "Data"}
_DEBUG_PREFIXES = (".debug", ".gnu.debuglto_.debug_", ".gnu.linkonce.wi.", ".zdebug", ".line", ".stab")


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


def section_letters(sections: tuple[E.Section, ...]) -> list[str]:
    """The lower-case nm letter BFD gives a symbol defined in each section."""
    out = []
    for s in sections:
        has_contents = s.type != E.SHT_NOBITS
        load = s.alloc and has_contents
        if s.flags & E.SHF_EXECINSTR:
            out.append("t")
        elif load:
            out.append("d" if s.flags & E.SHF_WRITE else "r")
        elif not has_contents:
            out.append("b")
        elif not s.alloc and s.name.startswith(_DEBUG_PREFIXES):
            out.append("N")
        elif not s.flags & E.SHF_WRITE:
            out.append("n")
        else:
            out.append("?")
    return out


def nm_letters(f: E.ElfFile) -> tuple[np.ndarray, np.ndarray]:
    """(indices, letters) of the symbols ``nm --size-sort`` would print; letters as a 'U1' array."""
    s = f.symbols
    if s is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype="U1")
    keep = (s.size != 0) & (s.shndx != E.SHN_UNDEF) & (s.shndx != E.SHN_ABS)
    keep &= (s.type != E.STT_SECTION) & (s.type != E.STT_FILE)
    keep &= (s.shndx < E.SHN_LORESERVE) | (s.shndx == E.SHN_COMMON)
    idx = np.flatnonzero(keep)
    ndx, typ, bind = s.shndx[idx], s.type[idx], s.bind[idx]
    letters = section_letters(f.sections) + ["?"]
    lower, upper = np.array(letters, dtype="U1"), np.array([c.upper() for c in letters], dtype="U1")
    ndx_in = np.where(ndx < len(lower) - 1, ndx, len(lower) - 1)
    by_section = np.where(bind == E.STB_GLOBAL, upper[ndx_in], lower[ndx_in])
    letters = np.select(
        [ndx == E.SHN_COMMON, typ == E.STT_GNU_IFUNC, (bind == E.STB_WEAK) & (typ == E.STT_OBJECT),
         bind == E.STB_WEAK, bind == E.STB_GNU_UNIQUE, (bind != E.STB_LOCAL) & (bind != E.STB_GLOBAL)],
        ["C", "i", "V", "W", "u", "?"],
        by_section,
    )
    return idx, letters


def getsizes(f: E.ElfFile, letters_kept: str) -> dict[str, int]:
    """bloat-o-meter's name -> summed size table for one file."""
    s = f.symbols
    idx, letters = nm_letters(f)
    sizes: dict[str, int] = {}
    if s is None:
        return sizes
    idx = idx[np.isin(letters, list(letters_kept))]
    idx = idx[~_skipped(s.strtab, s.name_offset[idx])]
    names, sub, get = s.names, NUMBER_RE.sub, sizes.get
    for i, size in zip(idx.tolist(), s.size[idx].tolist()):
        name = names[i]
        if "." in name:
            name = sub("", name)
        sizes[name] = get(name, 0) + size
    return sizes


def _skipped(strtab: bytes, offsets: np.ndarray) -> np.ndarray:
    """Names bloat-o-meter drops: empty, containing ':', generated prefixes, two exact names."""
    c = np.frombuffer(strtab, dtype=np.uint8)
    if len(c) == 0:
        return np.ones(len(offsets), dtype=bool)
    nul = np.flatnonzero(c == 0)
    end = nul[np.minimum(np.searchsorted(nul, offsets), len(nul) - 1)]
    colons = np.flatnonzero(c == 58)
    skip = (offsets == 0) | (end == offsets) | (np.searchsorted(colons, end) > np.searchsorted(colons, offsets))
    words = [p.encode() for p in SKIP_PREFIXES] + [n.encode() + b"\0" for n in SKIP_NAMES]
    first = c[np.minimum(offsets, len(c) - 1)]
    maybe = np.flatnonzero(np.isin(first, [w[0] for w in words]))  # compare windows only where the first byte fits
    for word in words:
        window = c[np.minimum(offsets[maybe][:, None] + np.arange(len(word)), len(c) - 1)]
        skip[maybe[(window == np.frombuffer(word, dtype=np.uint8)).all(axis=1)]] = True
    return skip


def calc(old: dict[str, int], new: dict[str, int], title: str) -> SymbolTable:
    """Counts and rows exactly as bloat-o-meter's ``calc`` orders them."""
    add = remove = grow = shrink = up = down = 0
    delta: list[tuple[int, str]] = []
    for name, size in old.items():
        other = new.get(name)
        if other is None:
            remove, down = remove + 1, down + size
            delta.append((-size, name))
        elif other != size:
            d = other - size
            grow, up = (grow + 1, up + d) if d > 0 else (grow, up)
            shrink, down = (shrink + 1, down - d) if d < 0 else (shrink, down)
            delta.append((d, name))
    for name, size in new.items():
        if name not in old:
            add, up = add + 1, up + size
            delta.append((size, name))
    delta = [item for item in delta if item[0]]  # zero rows are never printed: sort only the rest
    delta.sort(reverse=True)
    rows = tuple((n, old.get(n), new.get(n), d) for d, n in delta)
    return SymbolTable(title, add, remove, grow, shrink, up, down, rows, sum(old.values()), sum(new.values()))


def compat_results(old: E.ElfFile, new: E.ElfFile, mode: str = "all") -> list[SymbolTable]:
    """bloat-o-meter's tables: one for ``all``/``text``/``data+rodata``, three for ``categories``."""
    modes = ["text", "data", "rodata"] if mode == "categories" else [mode]
    return [calc(getsizes(old, FORMATS[m]), getsizes(new, FORMATS[m]), TITLES[m]) for m in modes]


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
