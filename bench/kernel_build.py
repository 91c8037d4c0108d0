"""Cold kernel build vs warm rebuild, side by side in one run, and the built kernel's boot under TCG.

The cold build is a tinyconfig 6.1 kernel from Debian's linux-source-6.1
with perfab's boot options, built into a cache that does not hold it yet;
the warm rebuild asks for the same kernel again and must find it without
running make.  Then the kernel boots under QEMU TCG (2 vCPUs) with a
busybox initramfs; the figures are wall seconds until /init runs, the
guest's own uptime at that point, and wall seconds until QEMU exits after
``poweroff -f``.

    PYTHONPATH=src python bench/kernel_build.py [--cache DIR] [--jobs 2]

``--cache`` defaults to a new directory under ``.perfab/``; the extracted
source is shared with ``.perfab/kernel`` when that already holds it, so
the cold figure is configure + make, not the tarball's extraction.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "kernel_build"))  # the busybox initramfs writer and the QEMU boot

from kbuild_guest import boot, initramfs  # noqa: E402
from perfab.kernel.build import KernelRequest, build_kernel  # noqa: E402

SHARED = ROOT / ".perfab" / "kernel"


def cache_dir(given: str | None) -> Path:
    """The cache to build into: the one given, else a fresh one sharing the extracted sources."""
    if given:
        return Path(given)
    fresh = Path(tempfile.mkdtemp(prefix="bench-kernel-", dir=ROOT / ".perfab"))
    if (SHARED / "sources").is_dir():
        (fresh / "sources").symlink_to((SHARED / "sources").resolve())
    return fresh


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="kernel cache directory (default: a new one under .perfab/)")
    ap.add_argument("--jobs", type=int, default=2, help="make -j (default 2)")
    args = ap.parse_args()
    cache = cache_dir(args.cache)
    request = KernelRequest(jobs=args.jobs)
    say = lambda line: print(f"  {line}", flush=True)  # noqa: E731

    started = time.monotonic()
    cold = build_kernel(request, cache, say)
    cold_s = time.monotonic() - started
    if cold.cached:
        print(f"{cache} already holds this kernel ({cold.key}); give an empty --cache for a cold build")
        return 1
    started = time.monotonic()
    warm = build_kernel(request, cache, say)
    warm_s = time.monotonic() - started
    assert warm.cached and warm.key == cold.key, "the warm rebuild did not hit the cache"

    with tempfile.TemporaryDirectory() as tmp:
        guest = boot(cold.bzimage, initramfs(Path(tmp) / "initrd.gz"), cpus=2)
    line = next((x for x in guest.console.splitlines() if "PERFAB-INIT" in x), "")
    uptime = re.search(r"uptime=([\d.]+)", line)
    cpus = re.search(r"cpus=(\d+)", line)

    print(f"\nkernel {cold.key} ({cold.bzimage.stat().st_size // 1024} KiB bzImage), make -j{args.jobs}")
    print(f"{'cold build (configure + make)':34} {cold_s:9.1f} s   (make alone {cold.build_s:.1f} s)")
    print(f"{'warm rebuild (cache hit, no make)':34} {warm_s:9.4f} s")
    print(f"{'cold / warm':34} {cold_s / warm_s:9.0f} x")
    print(f"{'boot to /init, wall (TCG, 2 vCPUs)':34} {guest.init_wall_s or float('nan'):9.2f} s")
    print(f"{'boot to /init, guest uptime':34} {float(uptime.group(1)) if uptime else float('nan'):9.2f} s")
    print(f"{'start to power-off, wall':34} {guest.wall_s:9.2f} s   (QEMU exit {guest.exit_code})")
    print(f"{'CPUs the guest sees':34} {cpus.group(1) if cpus else '?':>9} of 2")
    return 0 if guest.exit_code == 0 and cpus and cpus.group(1) == "2" else 1


if __name__ == "__main__":
    sys.exit(main())
