"""How repeatable the plugin's counts are with 2 vCPUs, with and without icount, and what icount costs.

Boots Debian's prebuilt kernel under TCG (one thread, round-robin between
vCPUs) BOOTS times in each of two modes, interleaved: perfab's default
deterministic mode (``-icount shift=0,sleep=off``, the kernel booted with
``maxcpus=1`` and the second CPU onlined by the init) and the same guest
settings without icount (fixed RTC, no randomisation; both CPUs brought up
at boot; guest timers follow host time).  The workload: two threads pinned
to vCPUs 0 and 1, each making ITERATIONS ``getppid`` calls and writing its
own word of one shared cache line, with a PAUSE after each write.  Both
models run.  Prints, per count, the median and the spread
(max - min, as a percent of the median) in each mode, then the host wall
time of a boot in each mode.

    PYTHONPATH=src python bench/kernel_smp_repeat.py [ITERATIONS] [BOOTS]
"""

from __future__ import annotations

import glob
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from perfab.kernel import qemu

WORKLOAD_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
static long n;
static struct { _Alignas(64) volatile long w[8]; } line;
static void *work(void *arg)
{
    long me = (long)arg;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(me, &s);
    sched_setaffinity(0, sizeof(s), &s);
    for (long i = 0; i < n; i++) {
        syscall(SYS_getppid);
        line.w[me] = i;
        __asm__ volatile("pause" ::: "memory");
    }
    return NULL;
}
int main(int argc, char **argv)
{
    pthread_t t[2];
    n = atol(argv[1]);
    for (long c = 0; c < 2; c++)
        pthread_create(&t[c], NULL, work, (void *)c);
    for (int c = 0; c < 2; c++)
        pthread_join(t[c], NULL);
    return 0;
}
"""
MODELS = qemu.PluginOptions(branch=True, coherence=True)


def without_icount(cmd: list[str]) -> list[str]:
    """The same QEMU command without -icount, the kernel bringing up every CPU at boot."""
    i = cmd.index("-icount")
    cmd = cmd[:i] + cmd[i + 2:]
    j = cmd.index("-append") + 1
    cmd[j] = cmd[j].replace(qemu.ONE_CPU_AT_BOOT, "").strip()
    return cmd


def boot(kernel: str, binary: str, iterations: int, cache: str, icount: bool) -> tuple[dict[str, int], float]:
    original = qemu.qemu_command
    if not icount:
        qemu.qemu_command = lambda *a: without_icount(original(*a))
    try:
        r = qemu.boot(qemu.BootRequest(kernel=kernel, argv=(binary, str(iterations)), vcpus=2, accel="tcg",
                                       plugin=MODELS, timeout_s=1800, cache_dir=cache))
    finally:
        qemu.qemu_command = original
    if r.failure:
        sys.exit(f"icount={icount}: {r.failure}\n{r.console_tail}")
    (w,) = r.records
    counts = {"insns_user": w.insns_user, "insns_kernel": w.insns_kernel}
    for i, (user, kernel_) in enumerate(w.per_vcpu):
        counts[f"vcpu{i} insns_user"], counts[f"vcpu{i} insns_kernel"] = user, kernel_
    counts.update({k: v for k, v in vars(w.branches).items()})
    counts.update(vars(w.coherence))
    return counts, r.host_wall_s


def report(runs: dict[bool, list[tuple[dict[str, int], float]]]) -> None:
    print(f"{'count':24} {'icount median':>14} {'spread %':>9} {'no icount median':>17} {'spread %':>9}")
    for key in runs[True][0][0]:
        cells = []
        for icount in (True, False):
            values = [c[key] for c, _ in runs[icount]]
            med = statistics.median(values)
            spread = 100.0 * (max(values) - min(values)) / med if med else 0.0
            cells.append(f"{med:14.0f} {spread:9.2f}" if icount else f"{med:17.0f} {spread:9.2f}")
        print(f"{key:24} {cells[0]} {cells[1]}")
    walls = {icount: statistics.median(w for _, w in runs[icount]) for icount in runs}
    print(f"host wall per boot, median: icount {walls[True]:.1f} s, without {walls[False]:.1f} s "
          f"({walls[True] / walls[False]:.2f}x)")


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    boots = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    kernel = sorted(glob.glob("/boot/vmlinuz-*"))[-1]
    with tempfile.TemporaryDirectory(prefix="perfab-bench-") as tmp:
        src, binary = Path(tmp) / "w.c", Path(tmp) / "w"
        src.write_text(WORKLOAD_C)
        subprocess.run(["gcc", "-O2", "-static", "-pthread", "-o", str(binary), str(src)], check=True)
        runs: dict[bool, list] = {True: [], False: []}
        for _ in range(boots):
            for icount in (True, False):
                runs[icount].append(boot(kernel, str(binary), iterations, str(Path(tmp) / "cache"), icount))
        print(f"kernel {kernel}, 2 vCPUs, {iterations} iterations per thread, {boots} boots per mode, both models")
        report(runs)


if __name__ == "__main__":
    main()
