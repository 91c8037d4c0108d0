"""One small class per machine setting that matters for measurement.

Each check has a ``name`` (its key in the snapshot), ``show()`` (the
current value as a short human-readable string, never raising),
``advice()`` (what to change and why, or ``None`` when the setting is fine
or cannot be judged here) and, for the settings perfab can tune,
``write(value)``.  A check reads below ``root`` (``/`` on a live system).

A setting whose file is absent shows as ``unavailable`` and gets no advice:
inside a VM there is no cpufreq directory, and the host, not the guest,
decides the frequency, so telling the user to change a governor would be
wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from perfab.errors import UsageError
from perfab.machine.sysfs import (
    UNAVAILABLE,
    UNKNOWN,
    format_cpu_list,
    is_missing,
    online_cpus,
    read_line,
    under,
    write_text,
)

_CPU = "/sys/devices/system/cpu"


@dataclass(frozen=True)
class Check:
    """A machine setting: read it, judge it, and (when tunable) set it."""

    root: Path = Path("/")  # the filesystem root the setting's files live under

    name: ClassVar[str] = ""  # the snapshot key, e.g. "kernel.aslr"
    title: ClassVar[str] = ""  # how a message names the setting
    choices: ClassVar[tuple[str, ...]] = ()  # values write() accepts; () = not tunable

    @property
    def tunable(self) -> bool:
        """Whether ``write`` can set this setting."""
        return bool(self.choices)

    def show(self) -> str:
        """The current value, human-readable; never raises."""
        raise NotImplementedError

    def advice(self) -> str | None:
        """What to change and why, or None when nothing should change."""
        return None

    def write(self, value: str) -> None:
        """Set the setting; raises ``PerfabError`` with the fix when it cannot."""
        if not self.choices:
            raise UsageError(f"{self.title} ({self.name}) is not a setting perfab can change")
        if value not in self.choices:
            allowed = ", ".join(self.choices)
            raise UsageError(f"{self.title} cannot be set to {value!r}: use one of {allowed}")
        self._write(value)

    def _write(self, value: str) -> None:
        raise NotImplementedError

    def path(self, path: str) -> Path:
        """``path`` under this check's root."""
        return under(self.root, path)


def _on_off(raw: str, on: str = "1", off: str = "0") -> str:
    if is_missing(raw):
        return raw
    return {on: "on", off: "off"}.get(raw, UNKNOWN)


class Governor(Check):
    """The cpufreq scaling governor of every online CPU, summarised."""

    name = "cpufreq.governor"
    title = "the CPU scaling governor"
    choices = ("performance", "powersave", "schedutil", "ondemand", "conservative", "userspace")

    def _files(self) -> dict[int, Path]:
        return {c: self.path(f"{_CPU}/cpu{c}/cpufreq/scaling_governor") for c in online_cpus(self.root)}

    def show(self) -> str:
        by_value: dict[str, list[int]] = {}
        for cpu, path in self._files().items():
            by_value.setdefault(read_line(path), []).append(cpu)
        if not by_value or set(by_value) == {UNAVAILABLE}:
            return UNAVAILABLE
        if len(by_value) == 1:
            return next(iter(by_value))
        parts = sorted(by_value.items(), key=lambda kv: kv[1][0])
        return ", ".join(f"{value} (CPU {format_cpu_list(cpus)})" for value, cpus in parts)

    def advice(self) -> str | None:
        value = self.show()
        if is_missing(value) or value == "performance":
            return None
        return (
            f"the scaling governor is {value}: the clock follows the load, so runs start at"
            f" different frequencies; set it to performance ({_CPU}/cpu*/cpufreq/scaling_governor)"
        )

    def _write(self, value: str) -> None:
        files = self._files()
        if not files:
            files = {0: self.path(f"{_CPU}/cpu0/cpufreq/scaling_governor")}
        for path in files.values():
            write_text(path, value, self.title)


class Boost(Check):
    """Frequency boost (turbo): ``cpufreq/boost`` or intel_pstate's ``no_turbo``."""

    name = "cpufreq.boost"
    title = "CPU frequency boost"
    choices = ("on", "off")

    def _source(self) -> tuple[Path, bool]:
        """The file that controls boost, and whether it is inverted (no_turbo).

        ``cpufreq/boost`` when neither file exists, so messages name the usual file.
        """
        boost = self.path(f"{_CPU}/cpufreq/boost")
        no_turbo = self.path(f"{_CPU}/intel_pstate/no_turbo")
        if not boost.exists() and no_turbo.exists():
            return no_turbo, True
        return boost, False

    def show(self) -> str:
        path, inverted = self._source()
        raw = read_line(path)
        return _on_off(raw, on="0", off="1") if inverted else _on_off(raw)

    def advice(self) -> str | None:
        if self.show() != "on":
            return None
        return (
            "frequency boost is on: the clock depends on temperature and on what the other"
            f" cores do; turn it off for steadier timings ({self._source()[0]})"
        )

    def _write(self, value: str) -> None:
        path, inverted = self._source()
        raw = ("0" if value == "on" else "1") if inverted else ("1" if value == "on" else "0")
        write_text(path, raw, self.title)


class Smt(Check):
    """Simultaneous multithreading, as ``smt/control`` reports it."""

    name = "cpu.smt"
    title = "SMT (hyper-threading)"

    def show(self) -> str:
        return read_line(self.path(f"{_CPU}/smt/control"))

    def advice(self) -> str | None:
        if self.show() != "on":
            return None
        return (
            "SMT is on: sibling threads share a core's caches and pipelines; pin the workload"
            f" to one thread per core or turn SMT off ({_CPU}/smt/control)"
        )


class Aslr(Check):
    """Address-space layout randomisation (``kernel.randomize_va_space``)."""

    name = "kernel.aslr"
    title = "ASLR"
    choices = ("0", "1", "2")
    _FILE = "/proc/sys/kernel/randomize_va_space"
    _STATES: ClassVar[dict[str, str]] = {"0": "off (0)", "1": "conservative (1)", "2": "full (2)"}

    def show(self) -> str:
        raw = read_line(self.path(self._FILE))
        return raw if is_missing(raw) else self._STATES.get(raw, UNKNOWN)

    def advice(self) -> str | None:
        value = self.show()
        if is_missing(value) or value == self._STATES["2"]:
            return None
        return (
            f"ASLR is {value}: every run gets the same memory layout, so a layout accident"
            " can pass for a real difference (Mytkowicz et al., ASPLOS 2009);"
            f" write 2 to {self._FILE} so runs sample layouts"
        )

    def _write(self, value: str) -> None:
        write_text(self.path(self._FILE), value, self.title)


class PerfEventParanoid(Check):
    """Who may use perf events (``kernel.perf_event_paranoid``)."""

    name = "kernel.perf_event_paranoid"
    title = "perf_event_paranoid"
    _FILE = "/proc/sys/kernel/perf_event_paranoid"

    def show(self) -> str:
        return read_line(self.path(self._FILE))

    def advice(self) -> str | None:
        value = self.show()
        if is_missing(value) or os.geteuid() == 0:
            return None
        try:
            level = int(value)
        except ValueError:
            return None
        if level <= 1:
            return None
        return (
            f"perf_event_paranoid is {level}: without root, perf cannot count kernel-mode (:k)"
            f" events; write 1 to {self._FILE} or run as root"
        )


class NmiWatchdog(Check):
    """The NMI watchdog, which keeps one hardware counter busy per CPU."""

    name = "kernel.nmi_watchdog"
    title = "the NMI watchdog"
    choices = ("on", "off")
    _FILE = "/proc/sys/kernel/nmi_watchdog"

    def show(self) -> str:
        return _on_off(read_line(self.path(self._FILE)))

    def advice(self) -> str | None:
        if self.show() != "on":
            return None
        return (
            "the NMI watchdog is on: it holds a hardware counter on every CPU, so perf"
            f" stat has one fewer and may multiplex; write 0 to {self._FILE}"
        )

    def _write(self, value: str) -> None:
        write_text(self.path(self._FILE), "1" if value == "on" else "0", self.title)


class TransparentHugepages(Check):
    """Transparent huge pages: the selected mode of ``transparent_hugepage/enabled``."""

    name = "mm.thp"
    title = "transparent huge pages"
    choices = ("always", "madvise", "never")
    _FILE = "/sys/kernel/mm/transparent_hugepage/enabled"

    def show(self) -> str:
        raw = read_line(self.path(self._FILE))
        if is_missing(raw):
            return raw
        selected = [w[1:-1] for w in raw.split() if w.startswith("[") and w.endswith("]")]
        return selected[0] if len(selected) == 1 else UNKNOWN

    def advice(self) -> str | None:
        if self.show() != "always":
            return None
        return (
            "transparent huge pages are always on: whether memory gets huge pages depends on"
            " fragmentation and khugepaged's timing, which varies from run to run;"
            f" write madvise to {self._FILE}"
        )

    def _write(self, value: str) -> None:
        write_text(self.path(self._FILE), value, self.title)
