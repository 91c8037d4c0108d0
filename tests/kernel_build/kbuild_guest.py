"""A busybox guest for the kernel build tests: an initramfs and a QEMU boot.

The initramfs is written here as a gzip'd "newc" cpio (the format of
Documentation/driver-api/early-userspace/buffer-format.rst), so no root is
needed for /dev/console.  Its /init mounts proc, sys and devtmpfs, prints
the guest's uptime and CPU count, runs an optional command, and powers off.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
up=$(cut -d' ' -f1 /proc/uptime)
echo "PERFAB-INIT uptime=$up cpus=$(grep -c ^processor /proc/cpuinfo) online=$(cat /sys/devices/system/cpu/online)"
{command}
echo PERFAB-POWEROFF
poweroff -f
"""


def _entry(name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0), ino: int = 1) -> bytes:
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name) + 1, 0]
    head = b"070701" + b"".join(f"{f:08x}".encode() for f in fields) + name.encode() + b"\0"
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def initramfs(where: Path, command: str = "") -> Path:
    """Write the busybox initramfs to ``where`` (gzip'd newc cpio) and return it."""
    items = [_entry(d, 0o040755, ino=i) for i, d in enumerate(["bin", "dev", "proc", "sys", "tmp"], 1)]
    items.append(_entry("dev/console", 0o020600, rdev=(5, 1), ino=10))
    items.append(_entry("bin/busybox", 0o100755, BUSYBOX.read_bytes(), ino=11))
    items.append(_entry("init", 0o100755, INIT.format(command=command).encode(), ino=12))
    items.append(_entry("TRAILER!!!", 0, ino=0))
    where.write_bytes(gzip.compress(b"".join(items), compresslevel=1))
    return where


@dataclass(frozen=True)
class Boot:
    """One guest boot: its console and how it ended."""

    console: str  # everything the guest printed on ttyS0
    exit_code: int | None  # QEMU's exit status (None: killed at the timeout)
    wall_s: float  # wall seconds from QEMU's start to its exit
    init_wall_s: float | None  # wall seconds until /init printed its line


def boot(bzimage: Path, initrd: Path, cpus: int = 2, timeout_s: float = 180.0, append: str = "") -> Boot:
    """Boot under TCG with a serial console; stop at power-off or the timeout."""
    qemu = shutil.which("qemu-system-x86_64")
    argv = [qemu, "-accel", "tcg", "-smp", str(cpus), "-m", "256M", "-nographic", "-no-reboot",
            "-kernel", str(bzimage), "-initrd", str(initrd), "-append", f"console=ttyS0 panic=-1 {append}".strip()]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    init_at: list[float] = []

    def read() -> None:
        for raw in proc.stdout:
            lines.append(raw.decode(errors="replace"))
            if not init_at and "PERFAB-INIT" in lines[-1]:
                init_at.append(time.monotonic() - started)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    wall_s = time.monotonic() - started
    reader.join(timeout=5)
    return Boot("".join(lines), code, wall_s, init_at[0] if init_at else None)
