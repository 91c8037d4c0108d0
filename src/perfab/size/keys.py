"""Symbol names as 64-bit hashes, for every symbol of a file at once.

A vmlinux has some 80,000 sized symbols and almost all of them are the same
in both builds; comparing them one Python string at a time costs more than
running ``nm`` twice.  So names are hashed in numpy, straight from the
string table, and only the keys that changed are ever decoded.

The hash is the polynomial (Horner) hash ``h = sum(c[i] * P**(n-1-i)) mod
2**64`` of the name's bytes after removing every ``.NUMBER`` (the regex
``\\.[0-9]+``, as bloat-o-meter strips them), as in Karp and Rabin,
"Efficient randomized pattern-matching algorithms", IBM J. Res. Dev. 31(2),
1987.  Horner's rule runs over every name at once, one byte position per
numpy step.  Two distinct names collide with probability about 2**-64 (for
n names, about n**2 / 2**65 overall: 2e-10 for a vmlinux).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

P = 0x100000001B3  # the 64-bit FNV prime
MASK = 2**64 - 1
FILE_MIX = np.uint64(0x9E3779B97F4A7C15)  # spreads a file's hash before it joins the name's
_PREFIXES = (b"__pfx_", b"__cfi_")
UNIQUE_ID = "__UNIQUE_ID_"


def hash_str(text: str) -> int:
    """The hash of ``text`` as given (no ``.NUMBER`` removal): equal to ``name_hashes`` on the same bytes."""
    h = 0
    for b in text.encode("utf-8", "surrogateescape"):
        h = (h * P + b) & MASK
    return h


@dataclass(frozen=True)
class NameHashes:
    """Hashes of the names at some string-table offsets."""

    name: np.ndarray  # uint64: hash of the name with every .NUMBER (and a __UNIQUE_ID_ counter) removed
    head: np.ndarray  # uint64: hash of the name without __pfx_/__cfi_, cut at its first '.' as stored
    odd: np.ndarray  # bool: the name starts inside a .NUMBER run of a longer string; hash it by hand


def _removed(c: np.ndarray) -> np.ndarray:
    """Bytes that ``\\.[0-9]+`` removes: a '.' before a digit, and the digit run after it."""
    removed = np.zeros(len(c), dtype=bool)
    dots = np.flatnonzero(c[:-1] == 46)
    run = dots[(c[dots + 1] >= 48) & (c[dots + 1] <= 57)]
    removed[run] = True
    step = run + 1
    while len(step):  # digit runs are short: one pass per digit
        removed[step] = True
        step = step[step + 1 < len(c)] + 1
        step = step[(c[step] >= 48) & (c[step] <= 57)]
    return removed


def name_hashes(strtab: bytes, offsets: np.ndarray, fold_counters: bool = True, heads: bool = True) -> NameHashes:
    """Hashes of the NUL-terminated names at ``offsets`` in ``strtab``.

    ``fold_counters`` False keeps ``__UNIQUE_ID_`` counters (bloat-o-meter's
    rules); ``heads`` False leaves ``head`` zero (cheaper).  The compiled
    reader computes them (``perfab_native.name_hashes``, a byte loop: a
    vmlinux's 150,000 names in milliseconds); without it, numpy does
    (``numpy_name_hashes``), with the same result.
    """
    try:
        from perfab_native import name_hashes as native
    except ImportError:
        return numpy_name_hashes(strtab, offsets, fold_counters, heads)
    n = len(offsets)
    name, head, odd = native(strtab, np.ascontiguousarray(offsets, dtype=np.int64).tobytes(), fold_counters, heads)
    return NameHashes(np.frombuffer(name, dtype=np.uint64, count=n), np.frombuffer(head, dtype=np.uint64, count=n),
                      np.frombuffer(odd, dtype=np.uint8, count=n).astype(bool))


def numpy_name_hashes(strtab: bytes, offsets: np.ndarray, fold_counters: bool = True, heads: bool = True) -> NameHashes:
    """``name_hashes`` in numpy.

    Horner's rule runs over all names at once, one byte position per step;
    names are sorted longest first so step ``k`` touches only the names
    longer than ``k`` (a prefix of the sorted arrays).
    """
    c = np.frombuffer(strtab, dtype=np.uint8)
    n = len(offsets)
    if n == 0 or len(c) == 0:
        z = np.zeros(n, dtype=np.uint64)
        return NameHashes(z, z.copy(), np.zeros(n, dtype=bool))
    removed = _removed(c)
    nul = np.flatnonzero(c == 0)
    a = np.clip(offsets.astype(np.int64), 0, len(c) - 1)
    end = nul[np.minimum(np.searchsorted(nul, a), len(nul) - 1)]
    if fold_counters:
        _remove_counter(c, a, end, removed)
    head_start, head_end = _head_span(c, a, end) if heads else (a, a)
    order = np.argsort(a - end, kind="stable")  # longest first
    start, length = a[order], (end - a)[order]
    hs, he = (head_start - a)[order], (head_end - a)[order]
    active = np.searchsorted(-length, -np.arange(int(length[0]) if n else 0), side="left")
    name, head = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)
    p = np.uint64(P)
    with np.errstate(over="ignore"):
        for k, m in enumerate(active.tolist()):
            pos = start[:m] + k
            ch = c[pos].astype(np.uint64)
            take = ~removed[pos]
            name[:m] = np.where(take, name[:m] * p + ch, name[:m])
            if heads:
                in_head = take & (k >= hs[:m]) & (k < he[:m])
                head[:m] = np.where(in_head, head[:m] * p + ch, head[:m])
    out_name, out_head = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    out_name[order], out_head[order] = name, head
    odd = removed[a] & (c[a] != 46)
    return NameHashes(out_name, out_head, odd)


def _head_span(c: np.ndarray, a: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[start, stop) of each name's head: no __pfx_/__cfi_, cut at the first '.'."""
    head_start = a + 6 * _has_prefix(c, a, end)
    dots = np.flatnonzero(c == 46)
    if not len(dots):
        return head_start, end
    first = dots[np.minimum(np.searchsorted(dots, head_start), len(dots) - 1)]
    return head_start, np.where((first >= head_start) & (first < end), first, end)


def _remove_counter(c: np.ndarray, a: np.ndarray, end: np.ndarray, removed: np.ndarray) -> None:
    """Drop the trailing ``__COUNTER__`` of kernel ``__UNIQUE_ID_<prefix><N>`` names (renumbered every build)."""
    word = np.frombuffer(UNIQUE_ID.encode(), dtype=np.uint8)
    maybe = np.flatnonzero((c[a] == word[0]) & (end - a > len(word)))
    window = c[np.minimum(a[maybe][:, None] + np.arange(len(word)), len(c) - 1)]
    tail = end[maybe[(window == word).all(axis=1)]] - 1
    while len(tail):  # walk back over already-removed .NUMBER bytes and the counter's digits
        tail = tail[removed[tail] | ((c[tail] >= 48) & (c[tail] <= 57))]
        removed[tail] = True
        tail = tail - 1


def _has_prefix(c: np.ndarray, a: np.ndarray, end: np.ndarray) -> np.ndarray:
    long_enough = end - a > 6
    idx = np.minimum(a[:, None] + np.arange(6), len(c) - 1)
    window = c[idx]
    hit = np.zeros(len(a), dtype=bool)
    for p in _PREFIXES:
        hit |= (window == np.frombuffer(p, dtype=np.uint8)).all(axis=1)
    return (hit & long_enough).astype(np.int64)


def combine(name: np.ndarray, file: np.ndarray) -> np.ndarray:
    """One uint64 key per (name hash, file hash); file hash 0 for globals."""
    with np.errstate(over="ignore"):
        return name ^ (file * FILE_MIX + (file >> np.uint64(29)))
