"""Read what perfab's TCG plugin (``native/tcg/perfab_tcg.c``) recorded.

The plugin writes one JSON line per workload window (start marker to stop
marker) and a last ``{"exit": true, ...}`` line with the whole boot's
counts.  ``read_records`` turns the windows into ``Window`` values;
``symbolize`` maps the per-kernel-block counts onto kernel symbols from a
``System.map``, a ``vmlinux`` (its ELF symbol table via ``nm``) or the
guest's own ``/proc/kallsyms`` (``parse_symbols``); ``symbolize_events``
does the same for the branch and coherence models' per-block counts, and
``name_lines`` names the data lines with the most HITM by the kernel data
symbol they fall in (``data_symbols``).
"""

from __future__ import annotations

import bisect
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from perfab.errors import ToolError, UsageError

TEXT_TYPES = frozenset("tTwW")
DATA_TYPES = frozenset("dDbBrRvV")  # data, bss, read-only data, weak objects
KERNEL_BASE = 0xFFFF800000000000  # the plugin's split: kernel mode at or above this address
DATA_SLACK = 4096  # a line this far past the last data symbol still falls in it; beyond: a raw address


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
class Branches:
    """Simulated branches of a window, cachegrind's events (Bc, Bcm, Bi, Bim) split user/kernel."""

    bc_user: int  # conditional branches executed in user mode
    bcm_user: int  # of them mispredicted
    bi_user: int  # indirect branches executed in user mode
    bim_user: int  # of them mispredicted
    bc_kernel: int  # conditional branches executed in kernel mode
    bcm_kernel: int  # of them mispredicted
    bi_kernel: int  # indirect branches executed in kernel mode
    bim_kernel: int  # of them mispredicted
    unresolved: int  # branches whose outcome an interrupt or fault hid: neither counted nor predicted


@dataclass(frozen=True)
class Coherence:
    """Transfers of modified lines (HITM) and invalidations between the vCPUs' private L1d, by privilege."""

    hitm_user: int  # misses of user-mode accesses that found the line modified in another vCPU
    hitm_kernel: int  # the same for kernel-mode accesses
    invalidations_user: int  # copies in other vCPUs removed by user-mode writes
    invalidations_kernel: int  # the same for kernel-mode writes


@dataclass(frozen=True)
class DataLine:
    """One data cache line of a window's HITM ranking."""

    vaddr: int  # virtual address of the line where the model first met an event on it
    paddr: int  # physical address of the line (the model's key)
    hitm: int  # transfers of the line modified by another vCPU
    invalidations: int  # copies of it invalidated in other vCPUs
    vcpus: tuple[int, ...]  # vCPU indexes (mod 32) whose accesses met those events


@dataclass(frozen=True)
class Window:
    """One start-to-stop marker window of the plugin."""

    index: int  # 1-based window number in the boot
    vcpus: int  # vCPUs of the guest
    insns_user: int  # guest instructions executed in user mode
    insns_kernel: int  # guest instructions executed in kernel mode
    cache: dict[str, CacheLevel] = field(default_factory=dict)  # "l1i"/"l1d"/"ll"; empty without cache=on
    kernel_tbs: tuple[tuple[int, int, int], ...] = ()  # (block start vaddr, insns, L1i misses)
    per_vcpu: tuple[tuple[int, int], ...] = ()  # (user, kernel) instructions of each vCPU index
    branches: Branches | None = None  # the branch model's counts; None without branch=on
    kernel_tb_branches: tuple[tuple[int, ...], ...] = ()  # (block start vaddr, Bc, Bcm, Bi, Bim)
    coherence: Coherence | None = None  # the coherence model's counts; None without coherence=on
    kernel_tb_coherence: tuple[tuple[int, ...], ...] = ()  # (block start vaddr, HITM, invalidations)
    hitm_lines: tuple[DataLine, ...] = ()  # the data lines with the most HITM, most first


@dataclass(frozen=True)
class KernelSymbols:
    """A kernel's symbols, each list sorted by address."""

    text: list[tuple[int, str]]  # (address, name) of text symbols: where blocks are charged
    data: list[tuple[int, str]]  # (address, name) of data symbols at kernel addresses: what lines are named by
    percpu: list[tuple[int, str]] = field(default_factory=list)  # (offset, name) of per-CPU variables


@dataclass(frozen=True)
class SymbolEvents:
    """A kernel symbol's share of one model's per-block counts."""

    name: str  # text symbol, or "[unknown]" outside every text symbol
    counts: tuple[int, ...]  # the per-block columns summed: (Bc, Bcm, Bi, Bim) or (HITM, invalidations)


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
    per_vcpu = tuple((int(v["insns_user"]), int(v["insns_kernel"])) for v in rec.get("per_vcpu", ()))
    lines = tuple(DataLine(int(v), int(p), int(h), int(i), tuple(c for c in range(32) if int(bits) >> c & 1))
                  for v, p, h, i, bits in rec.get("hitm_lines", ()))
    return Window(index=rec["window"], vcpus=rec["vcpus"], insns_user=rec["insns_user"],
                  insns_kernel=rec["insns_kernel"], cache=cache, kernel_tbs=tbs, per_vcpu=per_vcpu,
                  branches=Branches(**rec["branches"]) if "branches" in rec else None,
                  kernel_tb_branches=tuple(tuple(map(int, t)) for t in rec.get("kernel_tb_branches", ())),
                  coherence=Coherence(**rec["coherence"]) if "coherence" in rec else None,
                  kernel_tb_coherence=tuple(tuple(map(int, t)) for t in rec.get("kernel_tb_coherence", ())),
                  hitm_lines=lines)


def load_symbols(path: str | Path) -> list[tuple[int, str]]:
    """Sorted (address, name) of the text symbols in a System.map or a vmlinux."""
    return load_kernel_symbols(path)[0]


def load_kernel_symbols(path: str | Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """The text symbols (``load_symbols``) and the kernel data symbols (``data_symbols``) of one file."""
    found = read_kernel_symbols(path)
    return found.text, found.data


def read_kernel_symbols(path: str | Path) -> KernelSymbols:
    """A System.map's or a vmlinux's text, data and per-CPU symbols; a file without text symbols is refused."""
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
    return KernelSymbols(syms, data_symbols(text), percpu_symbols(text))


def parse_symbols(text: str, types: frozenset[str] = TEXT_TYPES) -> list[tuple[int, str]]:
    """Sorted (address, name) of the symbols of ``types`` (text by default) in System.map / nm / kallsyms lines."""
    syms = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in types:
            try:
                syms.append((int(parts[0], 16), parts[2]))
            except ValueError:
                continue
    syms.sort()
    return syms


def data_symbols(text: str) -> list[tuple[int, str]]:
    """Sorted (address, name) of the kernel's data symbols (data, bss, rodata) at kernel addresses; per-cpu
    offsets (small addresses under CONFIG_KALLSYMS_ABSOLUTE_PERCPU) are left out."""
    return [s for s in parse_symbols(text, DATA_TYPES) if s[0] >= KERNEL_BASE]


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


def _charge(syms: list[tuple[int, str]], rows) -> dict[str, list[int]]:
    """Per-block rows ``(vaddr, count, ...)`` summed per text symbol at or below each vaddr."""
    addrs = [a for a, _ in syms]
    totals: dict[str, list[int]] = {}
    for vaddr, *counts in rows:
        i = bisect.bisect_right(addrs, vaddr) - 1
        acc = totals.setdefault(syms[i][1] if i >= 0 else "[unknown]", [0] * len(counts))
        for k, c in enumerate(counts):
            acc[k] += c
    return totals


def symbolize_events(symbols: list[tuple[int, str]], window: Window, top: int = 20) -> dict[str, list[SymbolEvents]]:
    """Top kernel symbols by branch mispredictions (``by_branch_misses``: Bc, Bcm, Bi, Bim) and by HITM
    (``by_hitm``: HITM, invalidations), each block charged to the text symbol at or below its start."""
    out: dict[str, list[SymbolEvents]] = {}
    if window.branches is not None:
        rows = [SymbolEvents(n, tuple(c)) for n, c in _charge(symbols, window.kernel_tb_branches).items()]
        out["by_branch_misses"] = sorted(rows, key=lambda s: (-(s.counts[1] + s.counts[3]), s.name))[:top]
    if window.coherence is not None:
        rows = [SymbolEvents(n, tuple(c)) for n, c in _charge(symbols, window.kernel_tb_coherence).items()]
        out["by_hitm"] = sorted(rows, key=lambda s: (-s.counts[0], -s.counts[1], s.name))[:top]
    return out


def name_lines(data: list[tuple[int, str]], lines: tuple[DataLine, ...], percpu: list[tuple[int, str]] = (),
               bases: tuple[int, ...] = ()) -> list[tuple[str, DataLine]]:
    """Each line as ``symbol+0xOFF`` when it falls in the kernel's data (at or after a data symbol, within
    ``DATA_SLACK`` of the last), as ``symbol+0xOFF [cpuN]`` when it falls in CPU N's per-CPU area (``bases``:
    each CPU's ``__per_cpu_offset``, ``percpu``: the variables' offsets), else as its raw virtual address (user
    memory, slab objects)."""
    addrs, offsets = [a for a, _ in data], [o for o, _ in percpu]
    named = []
    for line in lines:
        name = _percpu_name(percpu, offsets, bases, line.vaddr)
        if name is None:
            i = bisect.bisect_right(addrs, line.vaddr) - 1
            inside = i >= 0 and line.vaddr < addrs[-1] + DATA_SLACK
            name = f"{data[i][1]}+{line.vaddr - addrs[i]:#x}" if inside else f"{line.vaddr:#x}"
        named.append((name, line))
    return named


def _percpu_name(percpu: list[tuple[int, str]], offsets: list[int], bases: tuple[int, ...],
                 vaddr: int) -> str | None:
    """``symbol+0xOFF [cpuN]`` for an address inside CPU N's copy of the per-CPU variables (``offsets``: theirs,
    sorted), else None."""
    if not percpu:
        return None
    end = offsets[-1] + DATA_SLACK
    for cpu, base in enumerate(bases):
        if base <= vaddr < base + end:
            i = bisect.bisect_right(offsets, vaddr - base) - 1
            if i >= 0:
                return f"{percpu[i][1]}+{vaddr - base - percpu[i][0]:#x} [cpu{cpu}]"
    return None


def percpu_symbols(text: str) -> list[tuple[int, str]]:
    """Sorted (offset, name) of the per-CPU variables in System.map, nm or kallsyms text: the data symbols from
    ``__per_cpu_start`` (offset 0 on x86-64) to ``__per_cpu_end``, each CPU's copy at its ``__per_cpu_offset``
    (/proc/kallsyms types them ``A``, absolute)."""
    syms = parse_symbols(text, DATA_TYPES | {"A"})
    ends = {name: addr for addr, name in syms if name in ("__per_cpu_start", "__per_cpu_end")}
    if ends.get("__per_cpu_start") != 0 or "__per_cpu_end" not in ends:
        return []
    return [(a, n) for a, n in syms if a < ends["__per_cpu_end"] and not n.startswith("__per_cpu_")]


def percpu_table(data: list[tuple[int, str]]) -> int | None:
    """The address of ``__per_cpu_offset[]`` among the kernel's data symbols, or None."""
    return next((a for a, n in data if n == "__per_cpu_offset"), None)
