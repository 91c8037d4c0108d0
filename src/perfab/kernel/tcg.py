"""Read what perfab's TCG plugin (``native/tcg/perfab_tcg.c``) recorded.

The plugin writes one JSON line per workload window (start marker to stop
marker) and a last ``{"exit": true, ...}`` line with the whole boot's
counts.  ``read_records`` turns the windows into ``Window`` values;
``symbolize`` maps the per-kernel-block counts onto kernel symbols from a
``System.map``, a ``vmlinux`` (its ELF symbol table via ``nm``) or the
guest's own ``/proc/kallsyms`` (``parse_symbols``).
"""

from __future__ import annotations

import bisect
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from perfab.errors import ToolError, UsageError

TEXT_TYPES = frozenset("tTwW")


@dataclass(frozen=True)
class CacheLevel:
    """Simulated references and misses of one cache level over a window."""

    size: int  # bytes
    assoc: int  # ways
    line: int  # line size, bytes
    refs_user: int  # references by user-mode instructions
    refs_kernel: int  # references by kernel-mode instructions
    misses_user: int  # misses by user-mode instructions
    misses_kernel: int  # misses by kernel-mode instructions


@dataclass(frozen=True)
class Window:
    """One start-to-stop marker window of the plugin."""

    index: int  # 1-based window number in the boot
    vcpus: int  # vCPUs of the guest
    insns_user: int  # guest instructions executed in user mode
    insns_kernel: int  # guest instructions executed in kernel mode
    cache: dict[str, CacheLevel] = field(default_factory=dict)  # "l1i"/"l1d"/"ll"; empty without cache=on
    kernel_tbs: tuple[tuple[int, int, int], ...] = ()  # (block start vaddr, insns, L1i misses)


@dataclass(frozen=True)
class SymbolCount:
    """A kernel symbol's share of a window."""

    name: str  # symbol, or "[unknown]" outside every text symbol
    insns: int  # kernel instructions in blocks starting in it
    l1i_misses: int  # L1i misses of those blocks


def read_records(path: Path) -> list[Window]:
    """The windows the plugin wrote to ``path`` (none when it wrote nothing)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    windows = []
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short when the guest was killed
        if "window" in rec:
            windows.append(_window(rec))
    return windows


def _window(rec: dict) -> Window:
    cache = {name: CacheLevel(**level) for name, level in rec.get("cache", {}).items()}
    tbs = tuple((int(a), int(n), int(m)) for a, n, m in rec.get("kernel_tbs", ()))
    return Window(index=rec["window"], vcpus=rec["vcpus"], insns_user=rec["insns_user"],
                  insns_kernel=rec["insns_kernel"], cache=cache, kernel_tbs=tbs)


def load_symbols(path: str | Path) -> list[tuple[int, str]]:
    """Sorted (address, name) of the text symbols in a System.map or a vmlinux."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            is_elf = f.read(4) == b"\x7fELF"
    except OSError as e:
        raise UsageError(f"cannot read kernel symbols from {p}: {e.strerror}; give System.map or vmlinux") from e
    text = _nm(p) if is_elf else p.read_text(errors="replace")
    syms = parse_symbols(text)
    if not syms:
        hint = " (Debian's placeholder: install the -dbg package or take the guest's kallsyms)" \
            if "linux-image" in text and "-dbg" in text else ""
        raise UsageError(f"{p} has no text symbols{hint}: give the kernel's System.map or an unstripped vmlinux")
    return syms


def parse_symbols(text: str) -> list[tuple[int, str]]:
    """Sorted (address, name) of the text symbols in System.map / nm / kallsyms lines."""
    syms = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in TEXT_TYPES:
            try:
                syms.append((int(parts[0], 16), parts[2]))
            except ValueError:
                continue
    syms.sort()
    return syms


def _nm(path: Path) -> str:
    try:
        proc = subprocess.run(["nm", str(path)], capture_output=True, text=True, timeout=300)
    except FileNotFoundError as e:
        raise ToolError("nm is missing: install binutils (make sysdeps)") from e
    if proc.returncode != 0:
        raise UsageError(f"nm cannot read {path}: {proc.stderr.strip()[:200]}")
    return proc.stdout


def symbolize(symbols: str | Path | list[tuple[int, str]], window: Window,
              top: int = 20) -> tuple[list[SymbolCount], list[SymbolCount]]:
    """Top kernel symbols of ``window`` by instructions and by L1i misses.

    Each block is charged to the text symbol at or below its start address
    (bisect over the sorted symbols: O((S + B) log S))."""
    syms = symbols if isinstance(symbols, list) else load_symbols(symbols)
    addrs = [a for a, _ in syms]
    totals: dict[str, list[int]] = {}
    for vaddr, insns, misses in window.kernel_tbs:
        i = bisect.bisect_right(addrs, vaddr) - 1
        name = syms[i][1] if i >= 0 else "[unknown]"
        acc = totals.setdefault(name, [0, 0])
        acc[0] += insns
        acc[1] += misses
    counts = [SymbolCount(n, v[0], v[1]) for n, v in totals.items()]
    by_insns = sorted(counts, key=lambda s: (-s.insns, s.name))[:top]
    by_misses = sorted((c for c in counts if c.l1i_misses), key=lambda s: (-s.l1i_misses, s.name))[:top]
    return by_insns, by_misses
