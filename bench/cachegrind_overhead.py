#!/usr/bin/env python3
"""Overhead of the cachegrind backend against a bare valgrind command.

Builds the bundled lock/unlock workload, then alternates, N times each:

- bare:    ``valgrind --tool=cachegrind --cache-sim=yes --I1/--D1/--LL ...
           --cachegrind-out-file=... --log-file=... -- ./inline ITERS``
- backend: ``CachegrindBackend.wrap`` + the same spawn + ``collect``

Both are spawned with ``os.posix_spawn`` and reaped with ``os.wait4``, the
workload's stdout going to /dev/null.  Prints the median wall time of each,
their ratio and the milliseconds the backend adds (target: <= 5%), and the
cost of wrap + collect alone.

Usage: bench/cachegrind_overhead.py [--sites 512] [--iters 20000] [-n 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from perfab.run.backends.cachegrind import CachegrindBackend  # noqa: E402

GEOMETRY = dict(l1i="32K,8,64", l1d="48K,12,64", ll="32M,16,64")


def build(tmp: Path, sites: int) -> Path:
    """gen_lockbench.py SITES | gcc -O2 -> the inlined build."""
    src = tmp / "lockbench.c"
    gen = [sys.executable, str(REPO / "workloads" / "gen_lockbench.py"), str(sites)]
    src.write_text(subprocess.run(gen, capture_output=True, text=True, check=True).stdout)
    subprocess.run(["gcc", "-O2", str(src), "-o", str(tmp / "inline")], check=True)
    return tmp / "inline"


def spawn_wait(argv: list[str]) -> int:
    """Run argv with stdout to /dev/null; the raw wait4 status."""
    actions = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
    pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=actions)
    _, status, _ = os.wait4(pid, 0)
    return status


def bare_command(backend: CachegrindBackend, argv: list[str], scratch: Path) -> list[str]:
    """What one would type by hand: the same tool and caches, one out file, one log."""
    g = backend.geometry
    return [
        backend.valgrind, "--tool=cachegrind", "--cache-sim=yes",
        f"--I1={g.i1.valgrind_arg()}", f"--D1={g.d1.valgrind_arg()}", f"--LL={g.ll.valgrind_arg()}",
        f"--cachegrind-out-file={scratch}/bare.out", f"--log-file={scratch}/bare.log", "--", *argv,
    ]


def measure(backend: CachegrindBackend, argv: list[str], scratch: Path, n: int):
    """Interleaved wall times (s): bare, backend, and the backend's own Python part."""
    bare, full, own = [], [], []
    for i in range(n):
        t0 = time.perf_counter()
        assert spawn_wait(bare_command(backend, argv, scratch)) == 0
        bare.append(time.perf_counter() - t0)
        run_dir = scratch / f"run{i}"
        t0 = time.perf_counter()
        cmd = backend.wrap(argv, run_dir, ())
        t1 = time.perf_counter()
        status = spawn_wait(cmd)
        t2 = time.perf_counter()
        m = backend.collect(run_dir, (), status)
        t3 = time.perf_counter()
        assert m.failure is None and m.metrics["instructions"] > 0, m
        full.append(t3 - t0)
        own.append((t1 - t0) + (t3 - t2))
    return bare, full, own


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=512)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("-n", type=int, default=10)
    args = ap.parse_args()
    backend = CachegrindBackend(**GEOMETRY)
    with tempfile.TemporaryDirectory(prefix="cg-overhead-") as tmp:
        exe = build(Path(tmp), args.sites)
        argv = [str(exe), str(args.iters)]
        spawn_wait(bare_command(backend, argv, Path(tmp)))  # warm the page cache
        bare, full, own = measure(backend, argv, Path(tmp), args.n)
    mb, mf = statistics.median(bare), statistics.median(full)
    print(f"valgrind {backend.version}, lockbench {args.sites} sites x {args.iters} iterations, "
          f"n={args.n} each, interleaved")
    for label, xs in (("bare valgrind", bare), ("backend", full)):
        print(f"{label:18s} median {statistics.median(xs) * 1e3:8.1f} ms  "
              f"(min {min(xs) * 1e3:.1f}, max {max(xs) * 1e3:.1f})")
    print(f"ratio backend/bare {mf / mb:.4f}  added {(mf - mb) * 1e3:+.1f} ms  (target <= 5%)")
    print(f"wrap + collect     median {statistics.median(own) * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
