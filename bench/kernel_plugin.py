"""Cost of perfab's TCG plugin, side by side in one run.

Boots Debian's prebuilt kernel (/boot/vmlinuz-*) under TCG with the same
static syscall loop: plain TCG, the plugin counting instructions, the plugin
with the cache model (all three with the guest clock on the host's, so the
workload's own wall time is host time), then the plugin counting in the
default deterministic mode (-icount: guest time is virtual, so only the
host-side times mean anything) and plain TCG booting the bzImage through
its own decompressor instead of the vmlinux inside it.  The modes are
interleaved over ROUNDS rounds; medians are compared.  Prints, per mode,
the host wall time of the whole boot-run-poweroff, the host time from
QEMU's start to the workload's start, the workload's own wall time, and the
ratios to plain TCG.

Targets: counting <= 3x plain TCG, cache model <= 30x, on the workload.

    PYTHONPATH=src python bench/kernel_plugin.py [ITERATIONS] [ROUNDS]
"""

from __future__ import annotations

import glob
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from perfab.kernel import qemu

LOOP_C = r"""
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv)
{
    volatile long sink = 0;
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) {
        sink += syscall(SYS_getppid);
        for (int j = 0; j < 50; j++)
            sink += j * i;
    }
    return 0;
}
"""

COUNT, CACHE = qemu.PluginOptions(), qemu.PluginOptions(cache=True)
MODES = {  # name: (plugin, deterministic, direct vmlinux boot)
    "plain TCG": (None, False, True),
    "plugin: counting": (COUNT, False, True),
    "plugin: cache model": (CACHE, False, True),
    "counting, icount": (COUNT, True, True),
    "plain TCG, bzImage": (None, False, False),
}
HOST_CLOCKED = ("plain TCG", "plugin: counting", "plugin: cache model", "plain TCG, bzImage")


def build_loop(where: Path) -> str:
    (where / "loop.c").write_text(LOOP_C)
    subprocess.run(["gcc", "-O2", "-static", "-o", str(where / "loop"), str(where / "loop.c")], check=True)
    return str(where / "loop")


def measure(kernel: str, loop: str, iterations: int, rounds: int, cache: str) -> dict[str, list]:
    samples: dict[str, list] = {m: [] for m in MODES}
    for _ in range(rounds):
        for mode, (plugin, deterministic, direct) in MODES.items():
            r = qemu.boot(qemu.BootRequest(kernel=kernel, argv=(loop, str(iterations)), vcpus=1,
                                           accel="tcg", plugin=plugin, deterministic=deterministic,
                                           direct=direct, timeout_s=900, cache_dir=cache))
            if r.failure:
                sys.exit(f"{mode}: {r.failure}\n{r.console_tail}")
            samples[mode].append((r.host_wall_s, r.to_workload_s, r.guest_wall_s))
    return samples


def report(samples: dict[str, list]) -> None:
    med = {m: [statistics.median(x[i] for x in s) for i in range(3)] for m, s in samples.items()}
    base = med["plain TCG"]
    print(f"{'mode':22} {'boot+run+off s':>15} {'to workload s':>14} {'workload s':>11}"
          f" {'x total':>8} {'x workload':>11}")
    for mode, (total, to_work, work) in med.items():
        if mode in HOST_CLOCKED:
            work_s, work_x = f"{work:11.3f}", f"{work / base[2]:11.2f}"
        else:
            work_s, work_x = f"{'(virtual)':>11}", f"{'-':>11}"
        print(f"{mode:22} {total:15.2f} {to_work:14.2f} {work_s} {total / base[0]:8.2f} {work_x}")


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    kernel = sorted(glob.glob("/boot/vmlinuz-*"))[-1]
    with tempfile.TemporaryDirectory(prefix="perfab-bench-") as tmp:
        loop = build_loop(Path(tmp))
        print(f"kernel {kernel}, {iterations} iterations, {rounds} interleaved rounds, medians")
        report(measure(kernel, loop, iterations, rounds, str(Path(tmp) / "cache")))


if __name__ == "__main__":
    main()
