"""Cache geometries for valgrind's cache simulator.

A geometry is three caches, each ``size,assoc,line`` (``"32K,8,64"``): the
first-level instruction cache (I1), the first-level data cache (D1) and the
last-level unified cache (LL).  Valgrind's simulator (cachegrind and
callgrind share it) accepts a cache only when:

- the set count ``size / (assoc * line)`` is a whole power of two,
- the line is a power of two of at least 16 bytes,
- the size exceeds the line and the associativity fits (``assoc <= size / line``),
- each number fits a signed 32-bit int.

Given on the command line, anything else is fatal ("Cache set count is not a
power of two").  For its *own* CPUID detection valgrind rounds the LL set
count down to a power of two and raises the associativity by the same factor
so the simulated size stays close (``maybe_tweak_LLc`` in ``cg_arch.c``).
This module does the same for geometry read from the host, saying so in a
note, and refuses a user-given geometry that valgrind would refuse, naming the
nearest one it accepts.

The host geometry comes from sysfs (``/sys/devices/system/cpu/cpu0/cache``)
or, failing that, from ``lscpu -C``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from perfab.errors import ToolError, UsageError

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
MIN_LINE_BYTES = 16  # valgrind's MIN_LINE_SIZE: smaller lines break its simulator
MAX_INT32 = 2**31 - 1  # valgrind keeps each number in a C int
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:I?B)?\s*$", re.IGNORECASE)
_SETS_PROBLEM = "sets (valgrind needs a power of two)"
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


@dataclass(frozen=True)
class CacheLevel:
    """One simulated cache."""

    size_bytes: int  # total capacity
    assoc: int  # ways per set
    line_bytes: int  # cache line size

    @property
    def sets(self) -> float:
        """Set count; fractional when the size does not split into whole sets."""
        return self.size_bytes / (self.assoc * self.line_bytes)

    def valgrind_arg(self) -> str:
        """The ``--I1=`` / ``--D1=`` / ``--LL=`` value: ``bytes,assoc,line``."""
        return f"{self.size_bytes},{self.assoc},{self.line_bytes}"

    def __str__(self) -> str:
        return f"{format_size(self.size_bytes)},{self.assoc},{self.line_bytes}"


@dataclass(frozen=True)
class CacheGeometry:
    """The three caches valgrind simulates, and where their numbers came from."""

    i1: CacheLevel  # first-level instruction cache
    d1: CacheLevel  # first-level data cache
    ll: CacheLevel  # last-level (unified) cache
    source: str  # "sysfs", "lscpu -C", "given", ...

    def describe(self) -> str:
        """One line for notes: ``I1=32K,8,64 D1=48K,12,64 LL=32M,16,64``."""
        return f"I1={self.i1} D1={self.d1} LL={self.ll}"


def format_size(size_bytes: int) -> str:
    """``32768`` -> ``"32K"``; sizes that are not whole K stay in bytes."""
    for suffix, unit in (("G", 1024**3), ("M", 1024**2), ("M", 1024**2 // 2), ("K", 1024)):
        if size_bytes % unit == 0:
            return f"{size_bytes / _UNITS[suffix]:g}{suffix}"
    return str(size_bytes)


def parse_size(text: str) -> int | None:
    """``"48K"`` -> 49152, ``"27.5M"`` -> 28835840; None when not a whole byte count."""
    m = _SIZE_RE.match(text)
    if not m:
        return None
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    return int(value) if value == int(value) else None


def simulator_problem(level: CacheLevel) -> str | None:
    """Why valgrind's simulator would refuse ``level``; None when it accepts it."""
    if min(level.size_bytes, level.assoc, level.line_bytes) <= 0:
        return "size, associativity and line must all be positive"
    if level.size_bytes > MAX_INT32:
        return f"size {level.size_bytes} B overflows valgrind's 32-bit cache size"
    if level.line_bytes & (level.line_bytes - 1) or level.line_bytes < MIN_LINE_BYTES:
        return f"line {level.line_bytes} B must be a power of two >= {MIN_LINE_BYTES}"
    if level.size_bytes <= level.line_bytes:
        return "size must exceed the line size"
    if level.assoc > level.size_bytes // level.line_bytes:
        return f"associativity {level.assoc} exceeds size / line"
    sets = level.sets
    if sets != int(sets) or int(sets) & (int(sets) - 1):
        return f"{sets:g} {_SETS_PROBLEM}"
    return None


def nearest_simulable(level: CacheLevel) -> CacheLevel:
    """Round the set count down to a power of two, scaling the ways up to keep the size.

    Same rule as valgrind applies to its auto-detected LL cache: more ways at
    the same capacity change the miss rate far less than a smaller cache.
    """
    sets = level.size_bytes // (level.assoc * level.line_bytes)
    if sets < 1:
        return CacheLevel(level.line_bytes * 2, 1, level.line_bytes)
    new_sets = 1 << (sets.bit_length() - 1)
    exact_sets = level.size_bytes / (level.assoc * level.line_bytes)
    new_assoc = max(level.assoc, int(0.5 + level.assoc * exact_sets / new_sets))
    return CacheLevel(level.line_bytes * new_assoc * new_sets, new_assoc, level.line_bytes)


def parse_level(key: str, text: str) -> CacheLevel:
    """Parse a user-given ``"size,assoc,line"``; UsageError names ``key`` and the fix."""
    parts = [p.strip() for p in str(text).split(",")]
    size = parse_size(parts[0]) if len(parts) == 3 else None
    if size is None or not parts[1].isdigit() or not parts[2].isdigit():
        raise UsageError(
            f"{key}={text!r} is not a cache geometry: write size,assoc,line with an "
            f'optional K/M size suffix, e.g. {key}="32K,8,64"'
        )
    level = CacheLevel(size, int(parts[1]), int(parts[2]))
    problem = simulator_problem(level)
    if problem is None:
        return level
    fix = f'correct it, e.g. {key}="32K,8,64"'
    if problem.endswith(_SETS_PROBLEM):
        fix = f'use {key}="{nearest_simulable(level)}" (nearest geometry valgrind simulates)'
    raise UsageError(f"{key}={text!r}: valgrind cannot simulate this cache: {problem}; {fix}")


def simulable(name: str, level: CacheLevel) -> tuple[CacheLevel, str | None]:
    """``level`` adjusted for valgrind when needed, and a note saying what changed."""
    problem = simulator_problem(level)
    if problem is None:
        return level, None
    adjusted = nearest_simulable(level)
    if simulator_problem(adjusted) is not None:
        raise ToolError(
            f"host {name} cache {level} cannot be simulated ({problem}): "
            "give its geometry explicitly (l1i=, l1d=, ll=)"
        )
    return adjusted, f"host {name} cache {level} has {problem}: simulated as {adjusted}"


def _pick(caches: list[tuple[int, str, CacheLevel]], origin: str) -> CacheGeometry:
    """Choose I1, D1 and the highest-level unified cache from (level, type, cache) rows."""
    i1 = [c for lvl, kind, c in caches if lvl == 1 and kind.startswith("instruction")]
    d1 = [c for lvl, kind, c in caches if lvl == 1 and kind.startswith("data")]
    unified = sorted(
        ((lvl, c) for lvl, kind, c in caches if kind == "unified"),
        key=lambda row: (row[0], row[1].size_bytes),
    )
    if not (i1 and d1 and unified):
        raise ToolError(
            f"{origin} lists no L1i, L1d and unified cache: give the geometry "
            'explicitly, e.g. l1i="32K,8,64", l1d="32K,8,64", ll="8M,16,64"'
        )
    return CacheGeometry(i1[0], d1[0], unified[-1][1], origin)


def read_sysfs(root: Path = SYSFS_CACHE) -> CacheGeometry:
    """Read ``root/index*/{size,ways_of_associativity,coherency_line_size,level,type}``."""
    caches = []
    for index in sorted(root.glob("index*")):
        try:
            fields = {
                name: (index / name).read_text().strip()
                for name in ("size", "ways_of_associativity", "coherency_line_size", "level", "type")
            }
            size = parse_size(fields["size"])
            line, ways = int(fields["coherency_line_size"]), int(fields["ways_of_associativity"])
            level = int(fields["level"])
        except (OSError, ValueError):
            continue
        if size is None or line <= 0:
            continue
        assoc = ways if ways > 0 else size // line  # 0 ways: fully associative
        caches.append((level, fields["type"].lower(), CacheLevel(size, assoc, line)))
    return _pick(caches, f"sysfs ({root})")


def parse_lscpu(text: str) -> CacheGeometry:
    """Parse ``lscpu -C=NAME,ONE-SIZE,WAYS,TYPE,LEVEL,COHERENCY-SIZE -B`` output."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ToolError("lscpu -C printed nothing: give the cache geometry explicitly (l1i=, l1d=, ll=)")
    header, caches = lines[0], []
    for row in lines[1:]:
        cols = dict(zip(header, row))
        size = parse_size(cols.get("ONE-SIZE", ""))
        try:
            line, ways = int(cols["COHERENCY-SIZE"]), int(cols["WAYS"])
            level = int(cols["LEVEL"])
        except (KeyError, ValueError):
            continue
        if size is None or line <= 0:
            continue
        assoc = ways if ways > 0 else size // line
        caches.append((level, cols.get("TYPE", "").lower(), CacheLevel(size, assoc, line)))
    return _pick(caches, "lscpu -C")


def host_geometry(root: Path = SYSFS_CACHE, lscpu: str = "lscpu") -> CacheGeometry:
    """The host's I1, D1 and LL geometry: sysfs first, then ``lscpu -C``.

    Returned as the hardware reports it; ``simulable`` adjusts a level that
    valgrind cannot simulate.  ToolError when neither source answers.
    """
    try:
        return read_sysfs(root)
    except ToolError as sysfs_err:
        cmd = [lscpu, "-C=NAME,ONE-SIZE,WAYS,TYPE,LEVEL,COHERENCY-SIZE", "-B"]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            raise ToolError(
                f"cannot read the host cache geometry ({sysfs_err}; `lscpu -C` failed): "
                'give it explicitly, e.g. l1i="32K,8,64", l1d="32K,8,64", ll="8M,16,64"'
            ) from None
        return parse_lscpu(out.stdout)


def resolve_geometry(
    given: dict[str, CacheLevel], host: CacheGeometry | None = None
) -> tuple[CacheGeometry, tuple[str, ...]]:
    """The geometry to simulate: ``given`` levels (keys l1i/l1d/ll), the rest the host's.

    Host levels valgrind cannot simulate are adjusted (``simulable``), each
    adjustment returned as a note.  ``host`` defaults to ``host_geometry()``,
    read only when a level is missing.
    """
    if {"l1i", "l1d", "ll"} <= given.keys():
        return CacheGeometry(given["l1i"], given["l1d"], given["ll"], "given"), ()
    host = host or host_geometry()
    levels, notes = dict(given), []
    for key, name, level in (("l1i", "I1", host.i1), ("l1d", "D1", host.d1), ("ll", "LL", host.ll)):
        if key not in levels:
            levels[key], note = simulable(name, level)
            notes += [note] if note else []
    source = f"{host.source}, {'/'.join(given)} given" if given else host.source
    return CacheGeometry(levels["l1i"], levels["l1d"], levels["ll"], source), tuple(notes)
