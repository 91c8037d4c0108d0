"""Cost of the TCG plugin's branch and coherence models, side by side in one run.

Boots Debian's prebuilt kernel (/boot/vmlinuz-*) under TCG with the static
loop of ``bench/kernel_plugin.py`` (a ``getppid`` and 50 additions per
iteration) in each mode: plain TCG (no plugin), the plugin counting
instructions, the plugin with the branch model, with the coherence model,
and with both; then, with 2 vCPUs, plain TCG against the plugin counting
(per-vCPU counts add a callback per block).  Every mode runs with the
guest clock on the host's (``deterministic=False``), so the workload's own
wall time, read by the guest, is host time.  The modes are interleaved
over ROUNDS rounds; medians are compared.  Prints, per mode, the host wall
time of the whole boot-run-poweroff, the workload's wall time and both
ratios to plain TCG with as many vCPUs.

Target: each model at most 10x plain TCG on the workload.

    PYTHONPATH=src python bench/kernel_models.py [ITERATIONS] [ROUNDS]
"""

from __future__ import annotations

import glob
import statistics
import sys
import tempfile
from pathlib import Path

from kernel_plugin import build_loop

from perfab.kernel import qemu

MODES = {  # name: (plugin options or None, vCPUs)
    "plain TCG": (None, 1),
    "plugin: counting": (qemu.PluginOptions(), 1),
    "plugin: branch model": (qemu.PluginOptions(branch=True), 1),
    "plugin: coherence model": (qemu.PluginOptions(coherence=True), 1),
    "plugin: both models": (qemu.PluginOptions(branch=True, coherence=True), 1),
    "plain TCG, 2 vCPUs": (None, 2),
    "counting, 2 vCPUs": (qemu.PluginOptions(), 2),
    "coherence, 2 vCPUs": (qemu.PluginOptions(coherence=True), 2),
}
BASE = {1: "plain TCG", 2: "plain TCG, 2 vCPUs"}


def measure(kernel: str, loop: str, iterations: int, rounds: int, cache: str) -> dict[str, list]:
    samples: dict[str, list] = {m: [] for m in MODES}
    for _ in range(rounds):
        for mode, (plugin, vcpus) in MODES.items():
            r = qemu.boot(qemu.BootRequest(kernel=kernel, argv=(loop, str(iterations)), vcpus=vcpus, accel="tcg",
                                           plugin=plugin, deterministic=False, timeout_s=1800, cache_dir=cache))
            if r.failure:
                sys.exit(f"{mode}: {r.failure}\n{r.console_tail}")
            samples[mode].append((r.host_wall_s, r.guest_wall_s))
    return samples


def report(samples: dict[str, list]) -> None:
    med = {m: [statistics.median(x[i] for x in s) for i in range(2)] for m, s in samples.items()}
    print(f"{'mode':24} {'boot+run+off s':>15} {'workload s':>11} {'x total':>8} {'x workload':>11}")
    for mode, (total, work) in med.items():
        base = med[BASE[MODES[mode][1]]]
        print(f"{mode:24} {total:15.2f} {work:11.3f} {total / base[0]:8.2f} {work / base[1]:11.2f}")


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
