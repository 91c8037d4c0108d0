"""Benchmark the symbol-level size diff against the kernel's scripts/bloat-o-meter.

    .venv/bin/python bench/size_symbols_vmlinux.py OLD NEW [--reps 7] [--dwarf-reps 3] [--bloat-o-meter PATH]

Three commands run on the same pair, alternating in rotating order within
each repetition so that drift and caches hit all of them alike, each as a
fresh process (interpreter start-up and imports included):

- ``bloat-o-meter OLD NEW`` (two ``nm`` runs and its own Python);
- ``perfab size --compat OLD NEW``: the same rules, whose output must be
  byte-identical (checked every repetition);
- ``perfab size --no-dwarf OLD NEW``: the explained diff (families, causes
  from symbols, section accounting) without reading DWARF;
- ``perfab size OLD NEW``: the explained diff with DWARF inline attribution,
  in the first ``--dwarf-reps`` repetitions only (it takes seconds).

Each runs as the installed ``perfab`` does (``perfab.cli:main_entry``), with
this checkout's ``src`` put first on ``PYTHONPATH``.  Prints the median and
minimum wall time of each, the ratio of medians against bloat-o-meter
(goals: ``--compat`` at least 5x faster, the explained diff with DWARF no
slower), both header and total lines, and the first lines of the explained
report.  A debug vmlinux pair
comes from Debian's ``linux-image-<version>-amd64-dbg``; the script from
Debian's ``linux-source-6.1`` (see tests/size/test_compat.py).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 5.0  # perfab size --compat against bloat-o-meter
DWARF_RATIO = 1.0  # the explained diff with DWARF against bloat-o-meter
CLI = "import sys; from perfab.cli import main_entry; sys.argv[0] = 'perfab'; main_entry()"


def find_bloat_o_meter(given: str | None) -> str:
    """The script: --bloat-o-meter, $PERFAB_BLOAT_O_METER, PATH, or the tests' cache."""
    cache = Path.home() / ".cache" / "perfab" / "bloat-o-meter"
    for candidate in (given, os.environ.get("PERFAB_BLOAT_O_METER"), shutil.which("bloat-o-meter"), str(cache)):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("scripts/bloat-o-meter not found: pass --bloat-o-meter, or run tests/size/test_compat.py once to fetch it")


def timed(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, its children included: bloat-o-meter's nm) and stdout of one run;
    exits on failure."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall_s = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:3])} failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall_s, cpu_s, proc.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--reps", type=int, default=7, help="repetitions of each command (default 7)")
    ap.add_argument("--dwarf-reps", type=int, default=3, help="repetitions of the explained diff with DWARF (default 3)")
    ap.add_argument("--bloat-o-meter", dest="script", help="path of scripts/bloat-o-meter")
    ap.add_argument("--show", type=int, default=40, help="lines of the explained report to print")
    args = ap.parse_args(argv)
    script = find_bloat_o_meter(args.script)
    commands = {
        "bloat-o-meter": ["python3", script, args.old, args.new],
        "perfab --compat": [sys.executable, "-c", CLI, "size", "--compat", args.old, args.new],
        "perfab --no-dwarf": [sys.executable, "-c", CLI, "size", "--no-dwarf", "--limit", "15", args.old, args.new],
        "perfab (DWARF)": [sys.executable, "-c", CLI, "size", "--limit", "15", args.old, args.new],
    }
    names = list(commands)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    outputs: dict[str, str] = {}
    for rep in range(args.reps):
        now = names if rep < args.dwarf_reps else names[:-1]
        k = rep % len(now)
        for name in now[k:] + now[:k]:  # rotate who goes first
            wall_s, cpu_s, outputs[name] = timed(commands[name])
            times[name].append(wall_s)
            cpu[name].append(cpu_s)
        if outputs["perfab --compat"] != outputs["bloat-o-meter"]:
            sys.exit("perfab --compat output differs from bloat-o-meter's: compat is broken")
    report(times, cpu, outputs, args)
    return 0


def report(times: dict[str, list[float]], cpu: dict[str, list[float]], outputs: dict[str, str], args) -> None:
    base = statistics.median(times["bloat-o-meter"])
    base_cpu = statistics.median(cpu["bloat-o-meter"])
    print(f"{args.reps} repetitions each ({args.dwarf_reps} with DWARF), alternating; wall time per run including "
          "interpreter start-up")
    print(f"load average {os.getloadavg()[0]:.1f}; CPU: user + system of the process and its children")
    print(f"{'command':<20} {'median s':>9} {'min s':>7} {'speed-up':>9} {'CPU s':>7} {'speed-up':>9}")
    for name, walls in times.items():
        if not walls:
            continue
        med = statistics.median(walls)
        med_cpu = statistics.median(cpu[name])
        print(f"{name:<20} {med:>9.3f} {min(walls):>7.3f} {base / med:>8.2f}x {med_cpu:>7.3f} {base_cpu / med_cpu:>8.2f}x")
    ratio = base / statistics.median(times["perfab --compat"])
    print(f"goal: --compat >= {TARGET_RATIO:.0f}x faster for the same symbol-level diff: {'met' if ratio >= TARGET_RATIO else 'NOT met'} ({ratio:.2f}x)")
    if times["perfab (DWARF)"]:
        dwarf = base / statistics.median(times["perfab (DWARF)"])
        print(f"goal: explained diff with DWARF within bloat-o-meter's time: {'met' if dwarf >= DWARF_RATIO else 'NOT met'} "
              f"({dwarf:.2f}x)")
    print("compat output: byte-identical to bloat-o-meter in every repetition\n")
    for name in ("bloat-o-meter", "perfab --compat"):
        lines = outputs[name].splitlines()
        print(f"{name}:\n  {lines[0]}\n  {lines[-1]}")
    print(f"\nperfab size --no-dwarf --limit 15 (first {args.show} lines):")
    print("\n".join(outputs["perfab --no-dwarf"].splitlines()[: args.show]))


if __name__ == "__main__":
    sys.exit(main())
