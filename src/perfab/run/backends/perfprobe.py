"""How many hardware counters ``perf stat`` can use here, and what to change.

``probe_counter_budget`` reads, without changing anything:

- whether a hardware PMU answers: a trial ``perf stat -e instructions true``
  (the only test that covers kernel, hypervisor and perf together), with the
  sysfs PMU directory as a hint;
- the general-purpose counter count, from the kernel's boot line
  (``... generic registers: N``), else CPUID through ``/dev/cpu/0/cpuid``
  (Intel leaf 0xA EAX[15:8]; AMD leaf 0x80000022 EBX[3:0]), else the AMD
  ``perfctr_core`` flag (6 core counters); None when none of these answers;
- the NMI watchdog, which holds one counter while it runs;
- ``perf_event_paranoid``.

Intel CPUs also have fixed counters for instructions and cycles; perfab
counts every hardware event against the budget anyway, which is safe.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from perfab.run.backends.perfparse import parse_csv

_PMU_DIRS = ("cpu", "cpu_core", "armv8_pmuv3", "armv8_pmuv3_0", "cpum_cf")
_DMESG_RE = re.compile(r"generic registers:\s+(\d+)")


@dataclass(frozen=True)
class CounterBudget:
    """What the PMU offers ``perf stat`` on this machine."""

    pmu_present: bool  # a hardware event (instructions) counted in a trial run
    pmu_sysfs: str | None  # /sys/bus/event_source/devices/<name> of the core PMU, when there is one
    general_counters: int | None  # general-purpose counters per logical CPU; None when undiscoverable
    counters_source: str  # where general_counters came from ("dmesg", "cpuid", "cpuinfo", "unknown")
    nmi_watchdog: bool | None  # /proc/sys/kernel/nmi_watchdog is 1 (it holds one counter)
    usable_counters: int | None  # general_counters minus the watchdog's; what max_events_per_run may be
    perf_event_paranoid: int | None  # /proc/sys/kernel/perf_event_paranoid
    advice: tuple[str, ...]  # what to change, one sentence each


def probe_counter_budget(perf: str = "perf") -> CounterBudget:
    """Look at this machine's PMU; see the module docstring for the sources."""
    sysfs = next((f"/sys/bus/event_source/devices/{d}" for d in _PMU_DIRS
                  if Path(f"/sys/bus/event_source/devices/{d}").is_dir()), None)  # fmt: skip
    present = _trial_counts_instructions(perf)
    counters, source = _general_counters() if present else (None, "unknown")
    watchdog = _read_int("/proc/sys/kernel/nmi_watchdog")
    usable = None if counters is None else counters - (1 if watchdog == 1 else 0)
    paranoid = _read_int("/proc/sys/kernel/perf_event_paranoid")
    advice = _advice(present, sysfs is not None, counters, watchdog, paranoid, perf)
    watch = None if watchdog is None else watchdog == 1
    return CounterBudget(present, sysfs, counters, source, watch, usable, paranoid, tuple(advice))


def describe_counters(budget: CounterBudget) -> str:
    """Text for ``perfab counters``: what the PMU offers and what to change."""
    lines = [
        f"hardware PMU:          {'yes' if budget.pmu_present else 'no'}"
        + (f" ({budget.pmu_sysfs})" if budget.pmu_sysfs else ""),
        f"general counters:      {_or_unknown(budget.general_counters)}"
        + (f" (from {budget.counters_source})" if budget.general_counters else ""),
        f"NMI watchdog:          {_on_off(budget.nmi_watchdog)}",
        f"usable per run:        {_or_unknown(budget.usable_counters)}"
        + ("  -> max_events_per_run" if budget.usable_counters else ""),
        f"perf_event_paranoid:   {_or_unknown(budget.perf_event_paranoid)}",
    ]
    lines += [f"advice: {a}" for a in budget.advice]
    return "\n".join(lines) + "\n"


def _trial_counts_instructions(perf: str) -> bool:
    if shutil.which(perf) is None:
        return False
    try:
        done = subprocess.run([perf, "stat", "-x", ";", "-e", "instructions", "--", "true"],
                              capture_output=True, text=True, timeout=30,
                              env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    rows = [r for r in parse_csv(done.stderr, ";").counters() if r.event.startswith("instructions")]
    return done.returncode == 0 and bool(rows) and rows[0].status == "ok"


def _general_counters() -> tuple[int | None, str]:
    for source, reader in (("dmesg", _from_dmesg), ("cpuid", _from_cpuid), ("cpuinfo", _from_cpuinfo)):
        count = reader()
        if count:
            return count, source
    return None, "unknown"


def _from_dmesg() -> int | None:
    try:
        text = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    counts = [int(m) for m in _DMESG_RE.findall(text)]
    return min(counts) if counts else None  # hybrid CPUs print one line per core type


def _cpuid(leaf: int) -> tuple[int, int, int, int] | None:
    try:
        with open("/dev/cpu/0/cpuid", "rb") as dev:
            dev.seek(leaf)
            raw = dev.read(16)
    except OSError:
        return None
    regs = tuple(int.from_bytes(raw[i : i + 4], "little") for i in range(0, 16, 4))
    return regs if len(raw) == 16 else None  # type: ignore[return-value]


def _from_cpuid() -> int | None:
    vendor = _cpuid(0)
    if vendor is None:
        return None
    name = b"".join(r.to_bytes(4, "little") for r in (vendor[1], vendor[3], vendor[2]))
    if name == b"GenuineIntel" and vendor[0] >= 0xA and (leaf := _cpuid(0xA)):
        return (leaf[0] >> 8) & 0xFF or None
    ext = _cpuid(0x80000000)
    if name == b"AuthenticAMD" and ext and ext[0] >= 0x80000022 and (leaf := _cpuid(0x80000022)):
        return leaf[1] & 0xF or None
    return None


def _from_cpuinfo() -> int | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return 6 if "AuthenticAMD" in text and "perfctr_core" in flags else None


def _advice(present: bool, listed: bool, counters: int | None, watchdog: int | None,
            paranoid: int | None, perf: str) -> list[str]:  # fmt: skip
    out: list[str] = []
    if shutil.which(perf) is None:
        out.append(f"{perf!r} not found: install perf (Debian: apt-get install linux-perf)")
    if not present and listed:
        out.append("sysfs lists a CPU PMU but `perf stat -e instructions true` counted nothing:"
                   " check perf_event_paranoid and that perf matches the running kernel")  # fmt: skip
    elif not present:
        out.append('no hardware PMU: use backend = "cachegrind" for instruction and I1-miss counts'
                   " (software events such as task-clock still work with perf)")  # fmt: skip
    if present and watchdog == 1:
        out.append("echo 0 > /proc/sys/kernel/nmi_watchdog frees one counter")
    if present and counters is None:
        out.append("general-purpose counter count unknown: set max_events_per_run in the spec"
                   " (4 per SMT thread on most Intel cores, 6 on AMD Zen)")  # fmt: skip
    if paranoid is not None and paranoid > 1 and os.geteuid() != 0:
        out.append(f"perf_event_paranoid is {paranoid}: kernel (:k) counts need root or"
                   " echo 1 > /proc/sys/kernel/perf_event_paranoid")  # fmt: skip
    return out


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _or_unknown(value: object) -> str:
    return "unknown" if value is None else str(value)


def _on_off(value: bool | None) -> str:
    return "unknown" if value is None else ("on (holds one counter)" if value else "off")
