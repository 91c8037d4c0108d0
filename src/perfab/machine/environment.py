"""The environment snapshot: take it, compare two, describe one.

A snapshot is a flat ``dict[str, str]``: stable dotted keys (``kernel.release``,
``cache.L1d``, ``tool.gcc``) mapped to human-readable values, so the store
can keep it as rows and the report can print what differs between two
sessions.  Values that could not be read are ``unavailable`` (no such file
here), ``unknown`` (unreadable) or ``absent`` (tool not installed).

``VOLATILE`` lists the keys expected to differ between any two sessions
and therefore left out of ``differences`` by default: the load average
and other work during the runs (``busy.*``, added when a session ends).
The host name is deliberately *not* volatile: two sessions on different
hosts are on different machines, which the report must flag.
The snapshot carries no date; the store records when each session ran.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from perfab.machine import checks as _c
from perfab.machine import noise as _n
from perfab.machine.busy import KEYS as BUSY_KEYS
from perfab.machine.busy import Busy
from perfab.machine.cpu import cache_row, cache_value, caches, cpu_model, topology
from perfab.machine.sysfs import (
    UNAVAILABLE, UNKNOWN, format_cpu_list, online_cpus, read_line, read_text, under,
)
from perfab.machine.tools import versions

VOLATILE: frozenset[str] = frozenset({"load.avg", *BUSY_KEYS})
MISSING = "missing"  # a key one snapshot has and the other lacks (older perfab)

CHECK_CLASSES: tuple[type[_c.Check], ...] = (
    _c.Governor, _c.Boost, _c.Smt, _c.Aslr, _c.PerfEventParanoid, _c.NmiWatchdog,
    _c.TransparentHugepages, _n.IsolatedCpus, _n.NohzFull, _n.LoadAverage, _n.Hypervisor,
)


def checks(root: Path = Path("/")) -> list[_c.Check]:
    """Every machine check, reading below ``root``."""
    return [cls(root) for cls in CHECK_CLASSES]


def snapshot(root: Path = Path("/"), tools: bool = True) -> dict[str, str]:
    """The machine's measurement-relevant settings; never raises.

    ``tools=False`` skips running the tools (their keys are then absent),
    for callers that only want the files below ``root``.
    """
    snap = _kernel(root)
    snap.update(_processor(root))
    for check in checks(root):
        snap[check.name] = _safe(check.show)
    if tools:
        snap.update(versions())
    return dict(sorted(snap.items()))


def _safe(show: Callable[[], str]) -> str:
    try:
        return show()
    except Exception:  # noqa: BLE001 - a snapshot must never fail a session
        return UNKNOWN


def _kernel(root: Path) -> dict[str, str]:
    release = read_line(under(root, "/proc/sys/kernel/osrelease"))
    host = read_line(under(root, "/proc/sys/kernel/hostname"))
    if root == Path("/"):
        release = release if release != UNAVAILABLE else os.uname().release
        host = host if host != UNAVAILABLE else os.uname().nodename
    return {
        "kernel.release": release,
        "kernel.cmdline": read_text(under(root, "/proc/cmdline")),
        "host.name": host,
    }


def _processor(root: Path) -> dict[str, str]:
    cpus = online_cpus(root)
    snap = {
        "cpu.model": cpu_model(root),
        "cpu.online": format_cpu_list(cpus) if cpus else UNKNOWN,
        "cpufreq.driver": read_line(under(root, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver")),
    }
    snap.update(topology(root))
    for cache in caches(root):
        snap[f"cache.{cache.name}"] = cache_value(cache)
    return snap


def differences(
    a: dict[str, str], b: dict[str, str], ignore: frozenset[str] = VOLATILE
) -> list[tuple[str, str, str]]:
    """``(key, a_value, b_value)`` for each key whose values differ, sorted by key.

    A key present on one side only shows ``missing`` on the other; keys in
    ``ignore`` are skipped.
    """
    keys = sorted((a.keys() | b.keys()) - ignore)
    pairs = ((k, a.get(k, MISSING), b.get(k, MISSING)) for k in keys)
    return [(k, va, vb) for k, va, vb in pairs if va != vb]


def describe(snap: dict[str, str]) -> list[str]:
    """Lines for the report's SETUP block: hardware, kernel, caches, frequency."""
    lines = [_hardware_line(snap), f"Kernel: {snap.get('kernel.release', UNKNOWN)}"]
    rows = [cache_row(k.removeprefix("cache."), v) for k, v in snap.items() if k.startswith("cache.")]
    rows = [r for r in rows if r is not None]
    if rows:
        rows.sort(key=lambda r: (r[5], r[0]))
        lines.append("Cache geometry (lscpu -C):")
        lines.extend(format_cache_table(rows))
    lines.append(
        f"Governor: {snap.get('cpufreq.governor', UNKNOWN)}; boost: {snap.get('cpufreq.boost', UNKNOWN)};"
        f" SMT: {snap.get('cpu.smt', UNKNOWN)}"
    )
    return lines + _busy_lines(snap)


def _busy_lines(snap: dict[str, str]) -> list[str]:
    """Other work during the runs (``perfab.machine.busy``), with the warning when it passed its limit."""
    busy = Busy.from_env(snap)
    if busy is None:
        return []
    warning = busy.warning()
    return [busy.describe()] + ([f"WARNING: {warning}"] if warning else [])


def _hardware_line(snap: dict[str, str]) -> str:
    model = snap.get("cpu.model", UNKNOWN)
    sockets, cores, threads = (snap.get(f"cpu.{k}", UNKNOWN) for k in ("sockets", "cores", "threads"))
    if sockets.isdigit() and cores.isdigit() and threads.isdigit() and int(sockets) > 0:
        per_socket = int(cores) // int(sockets)
        line = f"Hardware: {sockets}x {model}, {per_socket} cores/socket, {cores}C/{threads}T"
    else:
        line = f"Hardware: {model}, {threads} CPUs"
    vm, container = snap.get("virt.vm", UNKNOWN), snap.get("virt.container", UNKNOWN)
    if snap.get("virt.hypervisor") == "yes" or _named(vm):
        line += f"; under a hypervisor ({vm})" if _named(vm) else "; under a hypervisor"
    if _named(container):
        line += f"; in a container ({container})"
    return line


def _named(value: str) -> bool:
    """True for a systemd-detect-virt answer that names something."""
    return value not in (UNKNOWN, "absent", "none", "")


CACHE_HEADER = ["NAME", "ONE-SIZE", "ALL-SIZE", "WAYS", "TYPE", "LEVEL", "SETS", "COHERENCY-SIZE"]
_LEFT = {0, 4}  # NAME and TYPE are left-aligned, the rest right-aligned, as lscpu does


def format_cache_table(rows: list[list[str]]) -> list[str]:
    """The rows laid out as ``lscpu -C=NAME,ONE-SIZE,ALL-SIZE,WAYS,TYPE,LEVEL,SETS,COHERENCY-SIZE``."""
    table = [CACHE_HEADER, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(CACHE_HEADER))]
    out = []
    for row in table:
        cells = [c.ljust(w) if i in _LEFT else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        out.append(" ".join(cells).rstrip())
    return out
