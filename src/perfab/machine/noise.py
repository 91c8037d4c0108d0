"""Checks for sources of noise outside the CPU's own settings.

Other work on the machine (load average), CPUs shared with the rest of the
system (no ``isolcpus`` / ``nohz_full``), and a hypervisor that schedules
this machine's CPUs.  None of them can be tuned from a running system, so
these checks only show and advise.
"""

from __future__ import annotations

from perfab.machine.checks import Check
from perfab.machine.sysfs import (
    UNKNOWN, format_cpu_list, is_missing, online_cpus, parse_cpu_list, read_line, read_text,
)

_CPU = "/sys/devices/system/cpu"


def _cpu_list_value(raw: str) -> str:
    """A sysfs CPU list as shown in the snapshot: ``none`` when empty."""
    if is_missing(raw):
        return raw
    if raw in ("", "(null)"):
        return "none"
    try:
        return format_cpu_list(parse_cpu_list(raw))
    except ValueError:
        return UNKNOWN


class IsolatedCpus(Check):
    """CPUs removed from the scheduler's load balancing (``isolcpus=``)."""

    name = "cpu.isolated"
    title = "isolated CPUs"

    def show(self) -> str:
        return _cpu_list_value(read_line(self.path(f"{_CPU}/isolated")))

    def advice(self) -> str | None:
        if self.show() != "none" or len(online_cpus(self.root)) < 2:
            return None
        return (
            "no CPU is isolated: other tasks and interrupts share the workload's CPUs;"
            " boot with isolcpus=<cpus> nohz_full=<cpus> and pin the workload there"
        )


class NohzFull(Check):
    """CPUs that run without the periodic scheduler tick (``nohz_full=``)."""

    name = "cpu.nohz_full"
    title = "nohz_full CPUs"

    def show(self) -> str:
        return _cpu_list_value(read_line(self.path(f"{_CPU}/nohz_full")))

    def advice(self) -> str | None:
        isolated, nohz = IsolatedCpus(self.root).show(), self.show()
        if is_missing(isolated) or isolated == "none" or nohz != "none":
            return None
        return (
            f"CPUs {isolated} are isolated but still take the scheduler tick;"
            f" add nohz_full={isolated} to the kernel command line"
        )


class LoadAverage(Check):
    """The 1, 5 and 15 minute load averages when the snapshot was taken."""

    name = "load.avg"
    title = "the load average"

    def show(self) -> str:
        raw = read_line(self.path("/proc/loadavg"))
        if is_missing(raw):
            return raw
        fields = raw.split()
        return " ".join(fields[:3]) if len(fields) >= 3 else UNKNOWN

    def advice(self) -> str | None:
        value = self.show()
        cpus = len(online_cpus(self.root)) or 1
        try:
            load_1min = float(value.split()[0])
        except (ValueError, IndexError):
            return None
        if load_1min < 0.5 * cpus:
            return None
        return (
            f"the 1-minute load average is {load_1min:g} on {cpus} CPUs: other work competes"
            " with the workload; stop it before measuring"
        )


class Hypervisor(Check):
    """Whether the CPU reports running under a hypervisor (x86 ``hypervisor`` flag)."""

    name = "virt.hypervisor"
    title = "hypervisor"

    def show(self) -> str:
        text = read_text(self.path("/proc/cpuinfo"))
        if is_missing(text):
            return text
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "flags":
                return "yes" if "hypervisor" in value.split() else "no"
        return UNKNOWN  # not x86: the flag does not exist, so nothing can be said

    def advice(self) -> str | None:
        if self.show() != "yes":
            return None
        return (
            "running under a hypervisor: the host schedules these CPUs (steal time, shared"
            " caches) and may hide hardware counters; confirm small effects on bare metal"
        )
