"""Benchmark the whole-file inline reader on a pair of vmlinux files.

    .venv/bin/python bench/size_inline_vmlinux.py OLD NEW [--threads N] [--top 10]

Runs ``read_inline_index`` (every unit, every site; ``perfab size`` reads
the changed functions only, see bench/size_dwarf_subset.py) on both files
and ``compare_inlines`` in a child process and reports its wall time and
peak RSS (``RUSAGE_CHILDREN`` ``ru_maxrss``, the child's high-water mark),
against the targets of 30 s and 3 GB on a 2-core machine, then the top
inline changes.  A debug vmlinux comes from Debian's
``linux-image-<version>-amd64-dbg`` (the README's Code-size diffs section
says how).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGET_WALL_S = 30.0
TARGET_RSS_BYTES = 3 * 1024**3


def child(old: str, new: str, threads: int, top: int) -> None:
    from perfab.size.inline import compare_inlines, format_inline_changes, read_inline_index

    t0 = time.perf_counter()
    a = read_inline_index(old, threads)
    t1 = time.perf_counter()
    b = read_inline_index(new, threads)
    t2 = time.perf_counter()
    if a is None or b is None:
        sys.exit("no DWARF in one of the files: nothing to attribute")
    changes = compare_inlines(a, b)
    t3 = time.perf_counter()
    for name, idx in (("old", a), ("new", b)):
        print(
            f"{name}: {len(idx.sites)} inline sites in {idx.functions} functions, "
            f"{idx.covered_bytes} of {idx.function_bytes} function bytes inlined, "
            f"DWARF {'/'.join(map(str, idx.dwarf_versions))}, {len(idx.warnings)} unreadable units"
        )
    print(f"phases: read old {t1 - t0:.2f} s, read new {t2 - t1:.2f} s, compare {t3 - t2:.2f} s")
    print(f"{len(changes)} callees changed\n")
    print(format_inline_changes(changes, limit=top), end="")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--threads", type=int, default=0, help="reader threads (0: one per CPU)")
    ap.add_argument("--top", type=int, default=10, help="inline changes to print")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.old, args.new, args.threads, args.top)
        return 0
    for p in (args.old, args.new):
        if not Path(p).is_file():
            print(f"size_inline_vmlinux: {p}: no such file", file=sys.stderr)
            return 2
    cmd = [sys.executable, __file__, args.old, args.new, "--child", f"--threads={args.threads}", f"--top={args.top}"]
    start = time.perf_counter()
    proc = subprocess.run(cmd)
    wall_s = time.perf_counter() - start
    rss_bytes = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(f"\nwall {wall_s:.2f} s (target <= {TARGET_WALL_S:.0f} s), peak RSS {rss_bytes / 1024**2:.0f} MiB "
          f"(target <= {TARGET_RSS_BYTES // 1024**3} GiB)")
    ok = wall_s <= TARGET_WALL_S and rss_bytes <= TARGET_RSS_BYTES
    print("within targets" if ok else "OUTSIDE TARGETS")
    return proc.returncode or (0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())
