"""Benchmark ``perfab size`` against the kernel's scripts/bloat-o-meter: wall time and peak memory.

    .venv/bin/python bench/size_symbols_vmlinux.py OLD NEW [--reps 7] [--bloat-o-meter PATH] [--before SRC]

Four commands run on the same pair, alternating in rotating order within
each repetition so that drift, load and caches hit all of them alike, each
as a fresh process (interpreter start-up and imports included):

- ``bloat-o-meter OLD NEW`` (two ``nm`` runs and its own Python);
- ``perfab size --compat OLD NEW``: the same rules, whose output must be
  byte-identical (checked every repetition);
- ``perfab size --no-dwarf OLD NEW``: the explained diff (families, causes
  from symbols, section accounting) without reading DWARF;
- ``perfab size OLD NEW``: the explained diff with DWARF, read for the
  changed functions only.

Each perfab runs as the installed ``perfab`` does (``perfab.cli:main_entry``),
with this checkout's ``src`` first on ``PYTHONPATH``; ``--before SRC`` adds
``perfab size OLD NEW`` from another tree's ``src`` (an earlier commit's:
``mkdir /tmp/before && git archive REV src | tar -x -C /tmp/before``, then
``--before /tmp/before/src``; it runs with this checkout's compiled
reader).  Each process is
reaped with ``wait4``, whose usage gives its CPU time and its peak resident
set (``ru_maxrss``, the largest of the process and the children it waited
for: bloat-o-meter's ``nm`` included).  Prints per command the median and
minimum wall time, CPU time and peak RSS, their ratios against
bloat-o-meter, and the goals: ``--compat`` at least 5x faster; the explained
diff with DWARF within bloat-o-meter's wall time and at most 2x its peak
RSS.  A debug vmlinux pair comes from Debian's
``linux-image-<version>-amd64-dbg``, the script from Debian's
``linux-source-6.1`` (see tests/size/test_compat.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPAT_RATIO = 5.0  # perfab size --compat: at least this many times faster than bloat-o-meter
DWARF_RATIO = 1.0  # the explained diff with DWARF: at least as fast as bloat-o-meter
DWARF_RSS = 2.0  # the explained diff with DWARF: at most this many times bloat-o-meter's peak RSS
CLI = "import sys; from perfab.cli import main_entry; sys.argv[0] = 'perfab'; main_entry()"


def find_bloat_o_meter(given: str | None) -> str:
    """The script: --bloat-o-meter, $PERFAB_BLOAT_O_METER, PATH, or the tests' cache."""
    cache = Path.home() / ".cache" / "perfab" / "bloat-o-meter"
    for candidate in (given, os.environ.get("PERFAB_BLOAT_O_METER"), shutil.which("bloat-o-meter"), str(cache)):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("scripts/bloat-o-meter not found: pass --bloat-o-meter, or run tests/size/test_compat.py once to fetch it")


def timed(argv: list[str], src: Path = ROOT / "src") -> tuple[float, float, int, str]:
    """(wall s, CPU s, peak RSS bytes, stdout) of one run with ``src`` first on PYTHONPATH, reaped with wait4;
    exits on failure."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:3])} failed ({proc.returncode}): {stderr.strip()}")
    return wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, stdout


def commands(script: str, old: str, new: str) -> dict[str, list[str]]:
    """The four commands, by the name the table prints."""
    perfab = [sys.executable, "-c", CLI, "size"]
    return {
        "bloat-o-meter": ["python3", script, old, new],
        "perfab --compat": perfab + ["--compat", old, new],
        "perfab --no-dwarf": perfab + ["--no-dwarf", old, new],
        "perfab (DWARF)": perfab + [old, new],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--reps", type=int, default=7, help="repetitions of each command (default 7)")
    ap.add_argument("--bloat-o-meter", dest="script", help="path of scripts/bloat-o-meter")
    ap.add_argument("--show", type=int, default=40, help="lines of the explained report to print")
    ap.add_argument("--before", metavar="SRC", help="also time perfab size with this src tree (an earlier commit)")
    args = ap.parse_args(argv)
    cmds = commands(find_bloat_o_meter(args.script), args.old, args.new)
    srcs = {name: ROOT / "src" for name in cmds}
    if args.before:
        cmds["perfab before"], srcs["perfab before"] = cmds["perfab (DWARF)"], Path(args.before).resolve()
    names = list(cmds)
    runs: dict[str, list[tuple[float, float, int]]] = {n: [] for n in names}
    outputs: dict[str, str] = {}
    loads = []
    for rep in range(args.reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:  # rotate who goes first
            *usage, outputs[name] = timed(cmds[name], srcs[name])
            runs[name].append(tuple(usage))
        loads.append(os.getloadavg()[0])
        if outputs["perfab --compat"] != outputs["bloat-o-meter"]:
            sys.exit("perfab --compat output differs from bloat-o-meter's: compat is broken")
    report(runs, outputs, loads, args)
    return 0


def report(runs: dict[str, list[tuple[float, float, int]]], outputs: dict[str, str], loads: list[float], args) -> None:
    med = {n: [statistics.median(r[i] for r in rs) for i in range(3)] for n, rs in runs.items()}
    base_wall, base_cpu, base_rss = med["bloat-o-meter"]
    print(f"{args.reps} repetitions each, alternating; wall time per run including interpreter start-up; "
          f"load average {min(loads):.1f} to {max(loads):.1f}")
    print("CPU: user + system of the process and the children it waited for; RSS: peak resident set (ru_maxrss)")
    print(f"{'command':<18} {'median s':>9} {'min s':>7} {'speed-up':>9} {'CPU s':>7} {'speed-up':>9} {'peak MB':>8} "
          f"{'x RSS':>6}")
    for name, rs in runs.items():
        wall, cpu, rss = med[name]
        print(f"{name:<18} {wall:>9.3f} {min(r[0] for r in rs):>7.3f} {base_wall / wall:>8.2f}x {cpu:>7.3f} "
              f"{base_cpu / cpu:>8.2f}x {rss / 1e6:>8.1f} {rss / base_rss:>5.2f}x")
    compat = base_wall / med["perfab --compat"][0]
    dwarf, dwarf_rss = base_wall / med["perfab (DWARF)"][0], med["perfab (DWARF)"][2] / base_rss
    print(f"goal: --compat >= {COMPAT_RATIO:.0f}x faster for the same symbol-level diff: "
          f"{'met' if compat >= COMPAT_RATIO else 'NOT met'} ({compat:.2f}x)")
    print(f"goal: explained diff with DWARF within bloat-o-meter's time: "
          f"{'met' if dwarf >= DWARF_RATIO else 'NOT met'} ({dwarf:.2f}x as fast)")
    print(f"goal: explained diff with DWARF at most {DWARF_RSS:.0f}x bloat-o-meter's peak RSS: "
          f"{'met' if dwarf_rss <= DWARF_RSS else 'NOT met'} ({dwarf_rss:.2f}x)")
    print("compat output: byte-identical to bloat-o-meter in every repetition\n")
    for name in ("bloat-o-meter", "perfab --compat"):
        lines = outputs[name].splitlines()
        print(f"{name}:\n  {lines[0]}\n  {lines[-1]}")
    print(f"\nperfab size (first {args.show} lines):")
    print("\n".join(outputs["perfab (DWARF)"].splitlines()[: args.show]))


if __name__ == "__main__":
    sys.exit(main())
