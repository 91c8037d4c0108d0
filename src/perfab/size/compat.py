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
import numpy as np

from perfab.size import elf as E
from perfab.size import keys as K
from perfab.size.bloat import (  # noqa: F401 (re-exported: the table and its text live there, free of numpy)
    FORMATS, TITLES, SymbolTable, format_compat, header_line, row_line, total_line,
)

NUMBER_RE = re.compile(r"\.[0-9]+")
SKIP_PREFIXES = ("__mod_", "__se_sys", "__se_compat_sys", "__addressable_")
SKIP_NAMES = ("linux_banner", "vermagic")
_DEBUG_PREFIXES = (".debug", ".gnu.debuglto_.debug_", ".gnu.linkonce.wi.", ".zdebug", ".line", ".stab")


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


Sums = tuple[np.ndarray, np.ndarray, np.ndarray]  # (sorted unique keys, summed bytes, a symbol position per key)


def keyed_sizes(f: E.ElfFile) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(symbol positions, nm letters, name-hash keys) of the symbols bloat-o-meter keeps, any letter."""
    s = f.symbols
    idx, letters = nm_letters(f)
    if s is None or len(idx) == 0:
        return idx, letters, np.zeros(0, dtype=np.uint64)
    keep = ~_skipped(s.strtab, s.name_offset[idx])
    idx, letters = idx[keep], letters[keep]
    h = K.name_hashes(s.strtab, s.name_offset[idx], fold_counters=False, heads=False)
    key = h.name.copy()
    for j in np.flatnonzero(h.odd).tolist():  # names starting inside a longer string's .NUMBER run
        key[j] = K.hash_str(NUMBER_RE.sub("", s.name(int(idx[j]))))
    return idx, letters, key


def sums(idx: np.ndarray, key: np.ndarray, size: np.ndarray, selected: np.ndarray) -> Sums:
    """Bytes per key over the ``selected`` entries, with one symbol position per key."""
    sel = np.flatnonzero(selected)
    keys, first, inv = np.unique(key[sel], return_index=True, return_inverse=True)
    total = np.zeros(len(keys), dtype=np.int64)
    np.add.at(total, inv.ravel(), size[sel])  # exact in int64 (bincount's float weights round above 2**53)
    return keys, total, idx[sel[first]]


def join(a: Sums, b: Sums) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(keys of either side, old bytes, new bytes, old position, new position); -1: absent."""
    keys = np.unique(np.concatenate((a[0], b[0])))  # (np.union1d would import numpy.ma: 10 ms)
    out = [np.full(len(keys), -1, np.int64) for _ in range(4)]
    for side, (k, z, rep) in enumerate((a, b)):
        pos = np.searchsorted(keys, k)
        out[side][pos], out[side + 2][pos] = z, rep
    return keys, out[0], out[1], out[2], out[3]


def count_table(title: str, old: np.ndarray, new: np.ndarray, names: dict[int, str]) -> SymbolTable:
    """bloat-o-meter's counts and ordered rows from per-key bytes (-1: absent).

    ``names`` maps the position of every key whose size changed to its row name.
    """
    po, pn = old >= 0, new >= 0
    d = np.maximum(new, 0) - np.maximum(old, 0)
    both = po & pn
    changed = [(int(d[i]), names[i], i) for i in np.flatnonzero(d != 0).tolist()]
    changed.sort(key=lambda r: (r[0], r[1]), reverse=True)
    rows = tuple((n, int(old[i]) if po[i] else None, int(new[i]) if pn[i] else None, dl) for dl, n, i in changed)
    return SymbolTable(
        title, int((pn & ~po).sum()), int((po & ~pn).sum()), int((both & (d > 0)).sum()), int((both & (d < 0)).sum()),
        int(new[pn & ~po].sum() + d[both & (d > 0)].sum()), int(old[po & ~pn].sum() - d[both & (d < 0)].sum()),
        rows, int(old[po].sum()), int(new[pn].sum()),
    )


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


def compat_results(old: E.ElfFile, new: E.ElfFile, mode: str = "all") -> list[SymbolTable]:
    """bloat-o-meter's tables: one for ``all``/``text``/``data+rodata``, three for ``categories``.

    Names are compared as 64-bit hashes (``keys``); only the names of rows
    that changed are decoded.
    """
    sides = [(f, *keyed_sizes(f)) for f in (old, new)]
    out = []
    for m in ["text", "data", "rodata"] if mode == "categories" else [mode]:
        kept = list(FORMATS[m])
        per_side = [
            sums(idx, key, f.symbols.size[idx].astype(np.int64) if f.symbols is not None else np.zeros(0, np.int64),
                 np.isin(letters, kept))
            for f, idx, letters, key in sides
        ]
        _, o, n, orep, nrep = join(*per_side)
        names = {}
        for i in np.flatnonzero(np.maximum(n, 0) != np.maximum(o, 0)).tolist():
            f, rep = (old, orep[i]) if orep[i] >= 0 else (new, nrep[i])
            names[i] = NUMBER_RE.sub("", f.symbols.name(int(rep)))
        out.append(count_table(TITLES[m], o, n, names))
    return out
