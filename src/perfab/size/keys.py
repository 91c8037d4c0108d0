"""Symbol names as 64-bit hashes, for every symbol of a file at once.

A vmlinux has some 80,000 sized symbols and almost all of them are the same
in both builds; comparing them one Python string at a time costs more than
running ``nm`` twice.  So names are hashed in numpy, straight from the
string table, and only the keys that changed are ever decoded.

The hash is the polynomial (Horner) hash ``h = sum(c[i] * P**(n-1-i)) mod
2**64`` of the name's bytes after removing every ``.NUMBER`` (the regex
``\\.[0-9]+``, as bloat-o-meter strips them).  With prefix sums
``S[k] = sum(c[j] * P**-j)`` over the string table (P odd, so invertible
mod 2**64) the hash of any substring ``[A, B)`` is ``(S[B] - S[A]) *
P**(B-1)``: one gather per symbol, no loop (Karp and Rabin, "Efficient
randomized pattern-matching algorithms", IBM J. Res. Dev. 31(2), 1987).
Collisions between distinct names have probability about n**2 / 2**65.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

P = 0x100000001B3  # the 64-bit FNV prime: odd, so invertible mod 2**64
P_INV = pow(P, -1, 2**64)
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


def name_hashes(strtab: bytes, offsets: np.ndarray) -> NameHashes:
    """Hashes of the NUL-terminated names at ``offsets`` in ``strtab``."""
    c = np.frombuffer(strtab, dtype=np.uint8)
    if len(offsets) == 0 or len(c) == 0:
        z = np.zeros(len(offsets), dtype=np.uint64)
        return NameHashes(z, z.copy(), np.zeros(len(offsets), dtype=bool))
    removed = _removed(c)
    nul = np.flatnonzero(c == 0)
    a = np.clip(offsets.astype(np.int64), 0, len(c) - 1)
    end = nul[np.minimum(np.searchsorted(nul, a), len(nul) - 1)]
    _remove_counter(c, a, end, removed)
    kept = ~removed
    kmap = np.cumsum(kept, dtype=np.int32) - kept  # position in the kept stream of each byte
    kc = c[kept].astype(np.uint64)
    p_pow, inv_pow = _powers(len(kc) + 1)
    with np.errstate(over="ignore"):
        prefix = np.concatenate((np.zeros(1, dtype=np.uint64), np.cumsum(kc * inv_pow[: len(kc)], dtype=np.uint64)))
    head_start = a + 6 * _has_prefix(c, a, end)
    dots = np.flatnonzero(c == 46)
    if len(dots):
        first = dots[np.minimum(np.searchsorted(dots, head_start), len(dots) - 1)]
        head_end = np.where((first >= head_start) & (first < end), first, end)
    else:
        head_end = end
    odd = removed[a] & (c[a] != 46)
    return NameHashes(_span(prefix, p_pow, kmap[a], kmap[end]), _span(prefix, p_pow, kmap[head_start], kmap[head_end]), odd)


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


_POWERS: list[np.ndarray] = []  # [P**k, P**-k] for k < length, grown on demand, shared by both files


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P**k and P**-k mod 2**64 for k < n (at least): blocks of 4096 as an outer product."""
    if not _POWERS or len(_POWERS[0]) < n:
        block = 4096
        rows = max(1, -(-(n + n // 2) // block))  # headroom: the other file's table is a little longer
        with np.errstate(over="ignore"):
            _POWERS[:] = [_power_table(base, block, rows) for base in (P, P_INV)]
    return _POWERS[0], _POWERS[1]


def _power_table(base: int, block: int, rows: int) -> np.ndarray:
    low = np.cumprod(np.concatenate((np.ones(1, np.uint64), np.full(block - 1, base, np.uint64))), dtype=np.uint64)
    step = np.uint64(pow(base, block, 2**64))
    high = np.cumprod(np.concatenate((np.ones(1, np.uint64), np.full(rows - 1, step, np.uint64))), dtype=np.uint64)
    return np.multiply.outer(high, low).ravel()


def _has_prefix(c: np.ndarray, a: np.ndarray, end: np.ndarray) -> np.ndarray:
    long_enough = end - a > 6
    idx = np.minimum(a[:, None] + np.arange(6), len(c) - 1)
    window = c[idx]
    hit = np.zeros(len(a), dtype=bool)
    for p in _PREFIXES:
        hit |= (window == np.frombuffer(p, dtype=np.uint8)).all(axis=1)
    return (hit & long_enough).astype(np.int64)


def _span(prefix: np.ndarray, p_pow: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = (prefix[stop] - prefix[start]) * p_pow[np.maximum(stop - 1, 0)]
    return np.where(stop > start, h, np.uint64(0)).astype(np.uint64)


def combine(name: np.ndarray, file: np.ndarray) -> np.ndarray:
    """One uint64 key per (name hash, file hash); file hash 0 for globals."""
    with np.errstate(over="ignore"):
        return name ^ (file * FILE_MIX + (file >> np.uint64(29)))
