"""The boots of a kexec session: the plan's runs grouped by side, and each boot's command line.

A kexec session runs the session's plan unchanged (``perfab.plan``: with
the default order, seeded ABBA/BAAB blocks) and switches kernel only where
the plan switches side: each boot carries the longest stretch of planned
runs of one side, so ``A B B A`` is three boots (A, BB, A) and a block
boundary between two runs of one side does not cost a boot.  Every boot,
the first one too, is a kexec: each side's runs start from a kernel that
was just kexec'd into, never from one booted by the firmware.

A boot's command line is the home kernel's (``/proc/cmdline`` when the
session began, less ``BOOT_IMAGE=``, ``initrd=`` and any earlier
``perfab.boot=``), then the side's own words, then ``panic=`` (a kernel
that panics reboots through the firmware into the default boot entry:
the fallback), ``watchdog.open_timeout=`` (the side's ``boot_timeout``: a
hardware watchdog armed for the kexec, systemd's ``KExecWatchdogSec=``,
resets the machine unless the new system takes it over by then) and the
boot's token ``perfab.boot=s<session>.b<number>``.
Words after ``--`` belong to init and stay last.
"""

from __future__ import annotations

from perfab.kexec.identity import TOKEN_KEY
from perfab.plan import PlannedRun

PANIC_S = 10  # seconds a panicked side kernel waits before it reboots into the firmware's default entry
# words of the home command line a side does not inherit
_DROPPED = ("BOOT_IMAGE=", "initrd=", "watchdog.open_timeout=", TOKEN_KEY + "=")


def segments(runs: list[PlannedRun]) -> list[list[PlannedRun]]:
    """The runs in plan order, cut wherever the side changes: one list per boot."""
    out: list[list[PlannedRun]] = []
    for p in sorted(runs, key=lambda r: r.seq):
        if out and out[-1][0].variant == p.variant:
            out[-1].append(p)
        else:
            out.append([p])
    return out


def token(session: int, number: int) -> str:
    """The token of the ``number``-th boot of ``session``."""
    return f"s{session}.b{number}"


def cmdline(home: str, side: str, boot_token: str, boot_timeout_s: float, panic_s: int = PANIC_S) -> str:
    """The command line of one boot (see the module docstring)."""
    words = home.split()
    init_args: list[str] = []
    if "--" in words:
        at = words.index("--")
        words, init_args = words[:at], words[at:]
    kept = [w for w in words if not w.startswith(_DROPPED)]
    ours = [*side.split(), f"panic={panic_s}", f"watchdog.open_timeout={boot_timeout_s:.0f}",
            f"{TOKEN_KEY}={boot_token}"]
    return " ".join([*kept, *ours, *init_args])


def order_line(sides: list[str]) -> str:
    """``outline -> inlined -> inlined -> outline``: the kernels a session ran, in order."""
    return " -> ".join(sides) if sides else "no boot yet"


def plan_lines(exp, runs: list[PlannedRun]) -> list[str]:
    """What ``perfab plan`` says of a kexec session: its boots, in order, each with its side and runs."""
    if not any(v.kernel is not None and v.kernel.boot == "kexec" for v in exp.variants):
        return []
    cut = segments(runs)
    shown = " -> ".join(f"{seg[0].variant} ({len(seg)})" for seg in cut[:12]) + (" -> ..." if len(cut) > 12 else "")
    return [f"kexec: {len(cut)} boots, each a kexec into the side of the next runs (runs per boot): {shown}",
            "kexec: after each boot `perfab kexec resume` (the systemd unit) confirms the kernel and runs them"]
