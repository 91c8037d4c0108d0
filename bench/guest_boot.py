"""Boot to workload in each guest mode, side by side in one run: the initramfs and the host's root over 9p.

For each kernel (Debian's prebuilt 6.1 and, with ``--kernel``, others such as
a perfab-built one), boots are interleaved: initramfs, host root, initramfs,
...  Each boot runs ``/bin/true`` under TCG with the plugin counting (as a
study's runs do), and the figures are host seconds from QEMU's start to the
console's "workload start" (boot, init, and for the host root the 9p mount
and the overlay), and to QEMU's exit.  The ratio is host root over
initramfs, per boot pair, so load that comes and goes hits both modes alike.

    PYTHONPATH=src python bench/guest_boot.py [--pairs 3] [--kernel BZIMAGE ...]
"""

from __future__ import annotations

import argparse
import glob
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from perfab.kernel import qemu  # noqa: E402


def boot(kernel: str, root: str, cache: str) -> qemu.BootResult:
    req = qemu.BootRequest(kernel=kernel, argv=("/bin/true",), accel="tcg", plugin=qemu.PluginOptions(),
                           root=root, timeout_s=600, cache_dir=cache)
    result = qemu.boot(req)
    if result.failure:
        raise SystemExit(f"{kernel} ({root}): {result.failure}\n{result.console_tail}")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, help="interleaved boot pairs per kernel (default 3)")
    ap.add_argument("--kernel", action="append", default=[], help="another kernel image to measure")
    args = ap.parse_args()
    kernels = sorted(glob.glob("/boot/vmlinuz-*"))[-1:] + args.kernel
    cache = tempfile.mkdtemp(prefix="bench-guest-boot-")
    print(f"{'kernel':34} {'mode':10} {'to workload s':>14} {'QEMU total s':>13}")
    for kernel in kernels:
        boot(kernel, "initramfs", cache)  # warm the caches (direct image, initramfs archive)
        times: dict[str, list[tuple[float, float]]] = {"initramfs": [], "host": []}
        for _ in range(args.pairs):
            for root in times:
                r = boot(kernel, root, cache)
                times[root].append((r.to_workload_s or float("nan"), r.host_wall_s))
        for root, pairs in times.items():
            to, total = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
            print(f"{Path(kernel).name[:34]:34} {root:10} {to:14.1f} {total:13.1f}")
        ratios = [h[0] / i[0] for h, i in zip(times["host"], times["initramfs"])]
        print(f"{'':34} {'host/initramfs to workload':>26}: {statistics.median(ratios):.2f}x "
              f"(pairs: {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
