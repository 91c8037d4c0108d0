"""Directory trees shaped like /proc and /sys, for checks that take a ``root``.

``copy_live`` copies the files perfab reads from this machine (real
content, real shapes).  ``skylake_sp`` builds the tree of the two-socket
Xeon Gold 6138 whose ``lscpu -C`` output is quoted in
/work/shared/seeds/000_*.txt (SETUP block); its numbers come from that
table, the file formats from this machine's sysfs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

CPU = "sys/devices/system/cpu"
_CACHE_FILES = (
    "level", "type", "size", "ways_of_associativity", "number_of_sets",
    "coherency_line_size", "shared_cpu_list",
)
_SINGLE_FILES = (
    "proc/cpuinfo", "proc/cmdline", "proc/loadavg", "proc/sys/kernel/osrelease",
    "proc/sys/kernel/hostname", "proc/sys/kernel/randomize_va_space",
    "proc/sys/kernel/perf_event_paranoid", "proc/sys/kernel/nmi_watchdog",
    "sys/kernel/mm/transparent_hugepage/enabled", f"{CPU}/online", f"{CPU}/isolated",
    f"{CPU}/nohz_full", f"{CPU}/smt/control", f"{CPU}/cpufreq/boost", f"{CPU}/intel_pstate/no_turbo",
)


def put(root: Path, files: dict[str, str]) -> Path:
    """Write each ``relative path -> content`` under ``root``; returns root."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return root


def live_paths() -> list[str]:
    """Every file below / that a snapshot reads on this machine, relative to /."""
    paths = list(_SINGLE_FILES)
    for cpu_dir in sorted(Path("/", CPU).glob("cpu[0-9]*")):
        rel = cpu_dir.relative_to("/")
        paths += [f"{rel}/topology/physical_package_id", f"{rel}/topology/core_id"]
        paths += [f"{rel}/cpufreq/scaling_governor", f"{rel}/cpufreq/scaling_driver"]
        for index in sorted(cpu_dir.glob("cache/index*")):
            paths += [f"{index.relative_to('/')}/{name}" for name in _CACHE_FILES]
    return paths


def copy_live(root: Path) -> Path:
    """Copy the live files a snapshot reads (those that exist) under ``root``."""
    for rel in live_paths():
        src = Path("/", rel)
        if src.is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, root / rel)
    return root


def skylake_sp(root: Path) -> Path:
    """2 sockets x 20 cores x 2 threads; CPU n and n+40 are siblings."""
    files = {
        f"{CPU}/online": "0-79\n",
        f"{CPU}/isolated": "\n",
        f"{CPU}/smt/control": "on\n",
        f"{CPU}/intel_pstate/no_turbo": "0\n",
        "proc/cpuinfo": _cpuinfo(80),
    }
    caches = [  # level, type, size, ways, sets
        (1, "Data", "32K", 8, 64), (1, "Instruction", "32K", 8, 64),
        (2, "Unified", "1024K", 16, 1024), (3, "Unified", "28160K", 11, 40960),
    ]
    for cpu in range(80):
        core, package = cpu % 20, (cpu % 40) // 20
        first = package * 20
        base = f"{CPU}/cpu{cpu}"
        files[f"{base}/topology/physical_package_id"] = f"{package}\n"
        files[f"{base}/topology/core_id"] = f"{core}\n"
        files[f"{base}/cpufreq/scaling_governor"] = "powersave\n" if cpu < 4 else "performance\n"
        files[f"{base}/cpufreq/scaling_driver"] = "intel_pstate\n"
        for i, (level, type_, size, ways, sets) in enumerate(caches):
            own = cpu % 40
            shared = f"{first}-{first + 19},{first + 40}-{first + 59}" if level == 3 else f"{own},{own + 40}"
            values = (level, type_, size, ways, sets, 64, shared)
            for name, value in zip(_CACHE_FILES, values):
                files[f"{base}/cache/index{i}/{name}"] = f"{value}\n"
    return put(root, files)


def _cpuinfo(cpus: int) -> str:
    block = (
        "processor\t: {n}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
        "model name\t: Intel(R) Xeon(R) Gold 6138 CPU @ 2.00GHz\n"
        "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat ht\n\n"
    )
    return "".join(block.format(n=n) for n in range(cpus))
