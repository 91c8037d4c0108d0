"""What reading only the changed functions' DWARF saves over walking the whole file.

    .venv/bin/python bench/size_dwarf_subset.py OLD NEW [--reps 3]

``perfab size OLD NEW`` reads the DWARF of the functions of the changed
families only (``perfab_native.function_sites``: units found through
``.debug_aranges``, subtrees passed over through ``DW_AT_sibling``, pages
given back as units end).  This script takes those functions from the
symbol-level diff, as the diff does, and for each file times in a child
process, alternating, three reads:

- ``imports``: the child's interpreter and imports alone (the floor);
- ``chosen``: ``read_function_index`` of the changed functions;
- ``whole``: ``read_inline_index`` of every unit on every CPU, the reader the
  diff used before.

Prints per read the median wall and CPU seconds and the peak RSS of the
child (``wait4``), and what each read found: units, functions, sites.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("imports", "chosen", "whole")


def chosen_functions(old: str, new: str) -> tuple[list[int], list[int]]:
    """``.symtab`` indices of the changed families' function symbols in each file, as ``diff_files`` picks them."""
    from perfab.size import diff as D
    from perfab.size.elf import read_elf
    from perfab.size.symbols import read_symbols

    so, sn = read_symbols(read_elf(old)), read_symbols(read_elf(new))
    groups = D._family_groups(so, sn, D._join(so, sn, D.KINDS), D.KINDS)
    return D._functions_of(groups, so).tolist(), D._functions_of(groups, sn).tolist()


def child(mode: str, path: str, chosen_json: str) -> None:
    from perfab.size.inline import read_function_index, read_inline_index

    if mode == "chosen":
        index = read_function_index(path, json.loads(Path(chosen_json).read_text()))
    elif mode == "whole":
        index = read_inline_index(path)
    else:
        return
    units = index.columns.data["units"] if index.columns is not None else 0
    print(json.dumps({"units": units, "functions": index.functions, "sites": len(index.columns.callee)}))


def timed(argv: list[str]) -> tuple[float, float, int, dict]:
    """(wall s, CPU s, peak RSS bytes, what the child printed) of one child, reaped with wait4."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode().strip()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[-3:])} failed ({proc.returncode})")
    return wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, json.loads(text) if text else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each read (default 3)")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "PATH", "CHOSEN"), help=argparse.SUPPRESS)
    ap.add_argument("--chosen", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    if args.chosen:
        for k, chosen in enumerate(chosen_functions(args.old, args.new)):
            (Path(args.chosen) / f"{k}.json").write_text(json.dumps(chosen))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        # The diff runs in a child too: a child's peak RSS starts from its parent's at the fork, so the parent
        # stays small.
        subprocess.run([sys.executable, __file__, args.old, args.new, "--chosen", tmp], check=True)
        files = []
        for k, path in enumerate((args.old, args.new)):
            json_path = Path(tmp) / f"{k}.json"
            files.append((path, str(json_path), len(json.loads(json_path.read_text()))))
        results = {(path, mode): [] for path, _, _ in files for mode in MODES}
        for rep in range(args.reps):
            for path, chosen_json, _ in files:
                for mode in MODES[rep % 3:] + MODES[: rep % 3]:
                    cmd = [sys.executable, __file__, args.old, args.new, "--child", mode, path, chosen_json]
                    results[(path, mode)].append(timed(cmd))
    report(files, results, args.reps)
    return 0


def report(files, results, reps: int) -> None:
    print(f"{reps} repetitions per read, alternating; load average {os.getloadavg()[0]:.1f}")
    print(f"{'file':<28} {'read':<8} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'units':>6} {'functions':>9} "
          f"{'sites':>7}")
    for path, _, n in files:
        for mode in MODES:
            runs = results[(path, mode)]
            found = runs[-1][3]
            print(f"{path[-28:]:<28} {mode:<8} {statistics.median(r[0] for r in runs):>7.3f} "
                  f"{statistics.median(r[1] for r in runs):>7.3f} {statistics.median(r[2] for r in runs) / 1e6:>8.1f} "
                  f"{found.get('units', ''):>6} {found.get('functions', ''):>9} {found.get('sites', ''):>7}")
        print(f"{'':<28} ({n} function symbols chosen)")


if __name__ == "__main__":
    sys.exit(main())
