"""The machine a kexec session switches: what kernel runs, load one, boot it: the seam tests replace.

``RealMachine`` loads with kexec-tools (``kexec -l``, or ``kexec -s`` for
``kexec_file_load`` where lockdown asks for signed images) and boots the
loaded kernel with ``systemctl kexec`` where systemd is init (services
stop and filesystems are unmounted first, as for a reboot), else after a
``sync`` with ``kexec -e``.  The end of a session (``then``) reboots
through the firmware into the bootloader's default entry, kexecs back into
the kernel the session began in, powers off, or stays.  Without systemd,
reboot and power-off are the ``reboot(2)`` system call after a ``sync``.

A test's machine (``tests/kexec``) records what it was asked and "boots"
by changing the kernel it reports as running, so the session's walk from
boot to boot is tested without a reboot.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path
from typing import Protocol

from perfab.errors import ToolError
from perfab.kexec.checks import Host
from perfab.kexec.identity import KernelIdentity, running
from perfab.kexec.state import SideKernel

SETTLE_S = 900  # longest wait for systemd's start-up to finish before a boot's runs
_RB_AUTOBOOT, _RB_POWER_OFF = 0x01234567, 0x4321FEDC  # reboot(2) commands (linux/reboot.h)


class Machine(Protocol):
    """What the kexec session asks of the machine it runs on."""

    host: Host  # where the checks read /proc and /sys
    kexec: str | None  # the kexec-tools binary the checks look for; None: the machine needs none

    def running(self) -> KernelIdentity:
        """The kernel running now."""
        ...

    def boot_id(self) -> str:
        """This boot's id (``/proc/sys/kernel/random/boot_id``): a new one after every boot."""
        ...

    def settle(self) -> None:
        """Wait until the freshly booted system has started its services (they would disturb the runs)."""
        ...

    def load(self, kernel: SideKernel, cmdline: str, file_load: bool) -> None:
        """Load ``kernel`` with ``cmdline`` to be booted by ``switch``; ToolError when kexec refuses it."""
        ...

    def switch(self) -> None:
        """Boot the loaded kernel (on a real machine this process ends with the old kernel)."""
        ...

    def end(self, then: str) -> None:
        """After the last side: ``reboot`` (firmware, default entry), ``poweroff`` or ``stay``."""
        ...


class RealMachine:
    """This machine, switched with kexec-tools (see the module docstring)."""

    def __init__(self, kexec: str = "kexec", host: Host = Host()):
        self.kexec = kexec  # the kexec-tools binary
        self.host = host  # /proc and /sys of this machine

    def running(self) -> KernelIdentity:
        return running(self.host.root / "proc", self.host.root / "sys")

    def boot_id(self) -> str:
        return self.host.text("proc/sys/kernel/random/boot_id") or ""

    def systemd(self) -> bool:
        """systemd is init: switching and rebooting go through it."""
        return self.host.text("proc/1/comm") == "systemd" and shutil.which("systemctl") is not None

    def settle(self) -> None:
        if not self.systemd():
            return
        try:  # the unit is Type=exec: start-up can finish while this waits
            subprocess.run(["systemctl", "is-system-running", "--wait"], capture_output=True, timeout=SETTLE_S,
                           check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pass  # a unit that never settles: the runs go ahead, and the busy meter shows the other work

    def load(self, kernel: SideKernel, cmdline: str, file_load: bool) -> None:
        argv = [self.kexec, "-s" if file_load else "-l", kernel.image, f"--command-line={cmdline}"]
        if kernel.initrd:
            argv.append(f"--initrd={kernel.initrd}")
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise ToolError(f"`{' '.join(argv[:3])}` failed (exit {done.returncode}): "
                            f"{said[-1] if said else 'no message'}; check the image and `perfab kexec check`")

    def switch(self) -> None:
        os.sync()
        argv = ["systemctl", "kexec"] if self.systemd() else [self.kexec, "-e"]
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0 or argv[0] == self.kexec:  # `kexec -e` returns only when it failed
            said = (done.stderr or done.stdout).strip().splitlines()
            raise ToolError(f"`{' '.join(argv)}` did not boot the loaded kernel (exit {done.returncode}): "
                            f"{said[-1] if said else 'no message'}")

    def end(self, then: str) -> None:
        if then == "stay":
            return
        os.sync()
        if self.systemd():
            subprocess.run(["systemctl", then], check=False, stdin=subprocess.DEVNULL)
            return
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.reboot(_RB_POWER_OFF if then == "poweroff" else _RB_AUTOBOOT) != 0:
            raise ToolError(f"reboot(2) for {then} failed: {os.strerror(ctypes.get_errno())}; {then} by hand")


def home_kernel(identity: KernelIdentity, boot: Path = Path("/boot")) -> SideKernel | None:
    """The kernel the session began in, as a kernel to kexec back into (``then = "home"``): its /boot image
    and initrd by release; None when /boot does not hold it."""
    if not identity.release:
        return None
    image = boot / f"vmlinuz-{identity.release}"
    if not image.is_file():
        return None
    initrd = boot / f"initrd.img-{identity.release}"
    return SideKernel(str(image), str(initrd) if initrd.is_file() else None, "", identity.release,
                      identity.build_id, 0.0)
