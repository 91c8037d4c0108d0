"""What must hold before perfab kexecs a machine into a side's kernel: each problem is one line with its fix.

Checked before the session is stored (and, for the side's own kernel, again
after it booted, before its runs):

- the machine can kexec: ``kexec`` (kexec-tools) installed, root, the
  running kernel built with CONFIG_KEXEC (``/sys/kernel/kexec_loaded``
  exists) and ``kernel.kexec_load_disabled`` not set (once set it stays
  until a reboot);
- secure boot: under lockdown (``/sys/kernel/security/lockdown`` names
  ``integrity`` or ``confidentiality``) ``kexec_load`` is refused and
  ``kexec_file_load`` takes signed images only, so an unsigned side is
  refused here rather than by the kernel at the first switch;
- the side's kernel has what the mode needs (``REQUIRED``): kexec itself,
  to leave it for the next side, ``/proc`` and ``/sys`` to confirm it, and
  perf events when the backend counts with perf; read from its ``.config``
  (beside it in /boot, the build's, or its IKCONFIG), and said to be
  unchecked when there is none;
- a PMU where hardware events are counted (``/sys/bus/event_source/devices/cpu``
  or a hybrid CPU's ``cpu_core``): without one every such row would be
  ``<not supported>``.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from perfab.kexec.identity import ImageFacts

# Kernel options a kexec side's kernel needs, with why; the first of each tuple that is set satisfies it.
REQUIRED: tuple[tuple[tuple[str, ...], str], ...] = (
    (("KEXEC", "KEXEC_FILE"), "to kexec from it into the next side"),
    (("PROC_FS",), "for /proc/cmdline, which confirms the boot"),
    (("SYSFS",), "for /sys/kernel/notes, which confirms the build"),
)
PERF_OPTIONS = ((("PERF_EVENTS",), "for the perf backend's counters"),)
LOCKDOWN_OPTIONS = ((("KEXEC_FILE",), "to load a signed kernel under lockdown (kexec_file_load)"),)
PMU_DEVICES = ("cpu", "cpu_core", "cpu_atom")  # perf's core PMU on x86 (hybrid CPUs name two)


@dataclass(frozen=True)
class Host:
    """Where the checks read the machine's state: ``/`` on a real machine, a directory tree in tests."""

    root: Path = Path("/")  # the filesystem root holding proc/ and sys/
    euid: int | None = None  # the effective user id the switch runs as; None: this process's

    def text(self, rel: str) -> str | None:
        try:
            return (self.root / rel).read_text(errors="replace").strip()
        except OSError:
            return None

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()


def machine_problem(host: Host, release: str, kexec: str | None = "kexec") -> str | None:
    """Why this machine cannot kexec now, or None."""
    if kexec is not None and shutil.which(kexec) is None:
        return "kexec is not installed: install kexec-tools (apt-get install kexec-tools, or make sysdeps)"
    if (os.geteuid() if host.euid is None else host.euid) != 0:
        return ("loading and booting a kernel needs root (CAP_SYS_BOOT): run perfab as root, or from the "
                "systemd unit (perfab kexec unit --install)")
    if not host.exists("sys/kernel/kexec_loaded"):
        return (f"the running kernel {release} cannot kexec (no /sys/kernel/kexec_loaded: CONFIG_KEXEC is off); "
                "boot a kernel built with CONFIG_KEXEC=y first")
    if host.text("proc/sys/kernel/kexec_load_disabled") == "1":
        return ("kexec is disabled until the next reboot (kernel.kexec_load_disabled = 1, which cannot be turned "
                "back on); reboot, and remove the sysctl setting that sets it (/etc/sysctl.d)")
    return None


def lockdown(host: Host) -> str:
    """The kernel's lockdown mode: ``none``, ``integrity`` or ``confidentiality`` (``none`` without the LSM)."""
    text = host.text("sys/kernel/security/lockdown") or ""
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else "none"


def side_problem(side: str, facts: ImageFacts, mode: str, perf: bool) -> str | None:
    """Why ``side``'s kernel cannot be a kexec side here, or None (``mode``: the running kernel's lockdown)."""
    if mode != "none" and not facts.signed:
        return (f"secure boot: the running kernel is locked down ({mode}) and refuses the unsigned kernel of side "
                f"{side!r} ({facts.path}); sign it (sbsign with a key enrolled by mokutil --import) or turn "
                "validation off (mokutil --disable-validation)")
    if facts.config is None:
        return None
    from perfab.kernel.config import read_config

    config = read_config(Path(facts.config))
    needs = REQUIRED + (PERF_OPTIONS if perf else ()) + (LOCKDOWN_OPTIONS if mode != "none" else ())
    for options, why in needs:
        if not any(config.get(o, "n") in ("y", "m") for o in options):
            wanted = " or ".join(f"CONFIG_{o}" for o in options)
            return (f"the kernel of side {side!r} ({facts.path}) lacks {wanted} ({why}; its config: {facts.config}); "
                    "build it with that option")
    return None


def unchecked(side: str, facts: ImageFacts) -> str | None:
    """A note when a side's kernel options cannot be checked (no config beside it, none inside it)."""
    if facts.config is not None:
        return None
    return (f"note: side {side!r}: no config found for {facts.path} (none beside it, no IKCONFIG); its options "
            "are not checked")


def hardware_events(counters) -> list[str]:
    """The counters that need a PMU (not software events or tracepoints)."""
    from perfab.run.backends.perfsched import is_software

    return [c for c in counters if not is_software(c)]


def pmu_problem(host: Host, counters, where: str) -> str | None:
    """Why hardware ``counters`` cannot be counted ``where`` (no core PMU), or None."""
    wanted = hardware_events(counters)
    if not wanted or any(host.exists(f"sys/bus/event_source/devices/{d}") for d in PMU_DEVICES):
        return None
    return (f"{where} has no PMU (no /sys/bus/event_source/devices/cpu) for {', '.join(wanted)}: every such row "
            "would be <not supported>; count software events only, or run on a machine (or a guest with "
            "-cpu host,pmu=on) that has one")


def resumer_problem(host: Host, unit: str) -> str | None:
    """Why nothing would start perfab after the reboot, or None: under systemd, the unit must be enabled."""
    if host.text("proc/1/comm") != "systemd":
        return None  # another init: its boot script must run `perfab kexec resume` (the README shows one)
    wants = host.root / "etc/systemd/system/multi-user.target.wants" / unit
    if wants.exists() or (host.root / "lib/systemd/system/multi-user.target.wants" / unit).exists():
        return None
    return (f"{unit} is not enabled, so nothing would continue the session after the first reboot: "
            "run `perfab kexec unit --install` (as root)")
