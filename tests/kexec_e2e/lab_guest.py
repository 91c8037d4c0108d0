"""A QEMU guest that plays a lab machine for the kexec end-to-end test: this host's root, read-only, over 9p.

The guest boots Debian's kernel with a small initramfs written here (a
newc cpio: a static busybox, the 9p and virtio modules of that kernel in
the order ``modinfo -F depends`` gives, and ``/init``).  ``/init`` mounts
this host's root filesystem read-only over virtio-9p as the guest's root,
a tmpfs on ``/tmp`` and ``/run``, and a second 9p share, read-write, at
``/run/results``: the only place the guest writes that outlives a kexec.
Then it runs ``/run/results/boot.sh`` in that root, as the lab machine's
systemd would run the kexec unit at every boot.  No network.

Every kexec into a side boots the same initramfs (the spec names it as
the sides' initrd), so every boot of the guest runs the same ``/init``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
TOP_MODULES = ("virtio_pci", "9pnet_virtio", "9p")  # what mounting a virtio-9p share needs; deps follow

INIT = """#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
for m in {modules}; do /bin/busybox insmod /modules/$m.ko || echo "lab: insmod $m failed"; done
R=/newroot
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot $R \\
    || echo "lab: no host root"
/bin/busybox mount -t tmpfs tmp $R/tmp
/bin/busybox mount -t tmpfs run $R/run
/bin/busybox mkdir -p $R/run/results
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,rw,cache=mmap,msize=512000 results $R/run/results \\
    || echo "lab: no results share"
/bin/busybox mount -t proc proc $R/proc
/bin/busybox mount -t sysfs sys $R/sys
/bin/busybox mount -t devtmpfs dev $R/dev
echo "lab: booted $(/bin/busybox uname -r): $(/bin/busybox cat /proc/cmdline)"
exec /bin/busybox chroot $R /bin/sh /run/results/boot.sh
"""


def modules(release: str) -> list[str]:
    """The modules to load for a virtio-9p mount, dependencies first (``modinfo -F depends``)."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        deps = subprocess.run(["modinfo", "-k", release, "-F", "depends", name], capture_output=True,
                              text=True, check=True).stdout.strip()
        for dep in filter(None, deps.split(",")):
            visit(dep)
        order.append(name)

    for top in TOP_MODULES:
        visit(top)
    return order


def module_file(release: str, name: str) -> Path:
    return Path(subprocess.run(["modinfo", "-k", release, "-F", "filename", name], capture_output=True, text=True,
                               check=True).stdout.strip())


def initramfs(release: str, target: Path) -> Path:
    """Write the guest's initramfs (gzip newc cpio) to ``target``."""
    names = modules(release)
    files = {"bin/busybox": (BUSYBOX.read_bytes(), 0o755),
             "init": (INIT.format(modules=" ".join(names)).encode(), 0o755)}
    for name in names:
        data = module_file(release, name).read_bytes()
        files[f"modules/{name}.ko"] = (data, 0o644)
    dirs = ["bin", "modules", "proc", "sys", "dev", "newroot"]
    target.write_bytes(gzip.compress(_cpio(dirs, files), compresslevel=1))
    return target


def _cpio(dirs: list[str], files: dict[str, tuple[bytes, int]]) -> bytes:
    """A newc archive of ``dirs`` and ``files`` (Documentation/driver-api/early-userspace/buffer-format.rst)."""
    out, ino = bytearray(), 1
    for name in dirs:
        out += _member(name, 0o040755, b"", ino)
        ino += 1
    for name, (data, mode) in files.items():
        out += _member(name, 0o100000 | mode, data, ino)
        ino += 1
    out += _member("TRAILER!!!", 0, b"", 0)
    return bytes(out)


def _member(name: str, mode: int, data: bytes, ino: int) -> bytes:
    raw = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 2 if mode & 0o040000 else 1, 0, len(data), 0, 0, 0, 0, len(raw), 0]
    head = b"070701" + b"".join(f"{v:08x}".encode() for v in fields) + raw
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def qemu(kernel: Path, initrd: Path, share: Path, console: Path, reboot: bool = False) -> list[str]:
    """The guest's QEMU command: TCG, one vCPU, the host root and the results share over 9p.

    ``reboot``: a reboot restarts the guest from ``kernel`` and ``initrd`` (the firmware's default entry: the
    fallback), instead of ending QEMU."""
    cmd = [shutil.which("qemu-system-x86_64") or "qemu-system-x86_64", "-nodefaults", "-no-user-config",
           "-display", "none", "-m", "1024", "-smp", "1", "-accel", "tcg,thread=single",
           "-kernel", str(kernel), "-initrd", str(initrd), "-append", "console=ttyS0 rdinit=/init quiet panic=-1",
           "-serial", f"file:{console}",
           "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
           "-virtfs", f"local,path={share},mount_tag=results,security_model=none"]
    return cmd if reboot else [*cmd, "-no-reboot"]


BOOT_SH = """#!/bin/sh
# What the lab machine's systemd unit does at every boot (see `perfab kexec unit`).
cd /run/results
export PERFAB_KEXEC_STATE=/run/results/state HOME=/tmp XDG_CACHE_HOME=/run/results/cache
export PYTHONDONTWRITEBYTECODE=1 LC_ALL=C
echo "boot $(date +%s): $(cat /proc/cmdline)" >> boots.log
if [ -f state/session.json ]; then
    {perfab} kexec resume
elif [ ! -f started ]; then
    touch started
    {perfab} kexec start spec.toml --db /run/results/results.db --then poweroff
fi
echo "lab: perfab returned $? without switching; powering off"
sync
echo o > /proc/sysrq-trigger
sleep 30
"""


def boot_script(share: Path, perfab: Path) -> None:
    (share / "boot.sh").write_text(BOOT_SH.format(perfab=perfab))
    os.chmod(share / "boot.sh", 0o755)
