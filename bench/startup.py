"""Start-up of commands that analyse nothing, beside a bare interpreter.

    .venv/bin/python bench/startup.py [--reps 41]

Each command runs as a fresh process of the same interpreter, in rotating
order within each repetition so drift and caches hit all alike:

- ``python -c pass``: the floor, interpreter start-up alone;
- ``perfab --help``, ``perfab size --help``, ``perfab list --help``,
  ``perfab env --help``: the console-script entry (``perfab.cli:main_entry``)
  as the installed ``perfab`` runs it, with this checkout's ``src`` first;
- ``perfab list``: the same entry listing a small store (one experiment of
  two sides and 8 runs, stored here by the fake executor before timing);
- with ``--other SRC`` (another checkout's ``src``, e.g. the commit before
  a change exported by ``git archive``), ``other perfab list`` too.

Prints the median and minimum wall time of each and the ratio of medians
against the floor; the goal is at most 3x for ``--help``, ``size --help``
and ``list``.
Bytecode is cached as an installed package has it (``PYTHONPYCACHEPREFIX``
in a temporary directory, so nothing is written to the checkout, and
``PYTHONDONTWRITEBYTECODE`` dropped): compiling ``cli.py`` on every run
would be measured otherwise.  The median CPU time (user + system, from ``RUSAGE_CHILDREN``) is printed
beside it: on a shared machine, waiting for a core inflates wall times of
short processes alike, and CPU time shows what each command itself costs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO = 3.0
ENTRY = "import sys; from perfab.cli import main_entry; sys.argv[0] = 'perfab'; main_entry()"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "perfab --help": [sys.executable, "-c", ENTRY, "--help"],
    "perfab size --help": [sys.executable, "-c", ENTRY, "size", "--help"],
    "perfab list --help": [sys.executable, "-c", ENTRY, "list", "--help"],
    "perfab env --help": [sys.executable, "-c", ENTRY, "env", "--help"],
}
GOALS = ("perfab --help", "perfab size --help", "perfab list")
SMALL_SPEC = """[experiment]
name = "startup"
runs = 4
warmup = 0
[[variant]]
name = "a"
[[variant]]
name = "b"
[[workload]]
name = "w"
argv = ["sleep", "0.01"]
"""


def small_store(folder: str) -> str:
    """A store of one experiment (8 runs of the fake executor) in ``folder``; its path."""
    sys.path.insert(0, str(ROOT / "src"))
    from perfab.run.backends import TimeBackend
    from perfab.run.executor import FakeExecutor
    from perfab.run.runner import Runner
    from perfab.specfile import parse_spec
    from perfab.store import Store

    db = os.path.join(folder, "small.db")
    with Store(db) as store:
        Runner(parse_spec(SMALL_SPEC, "startup.toml"), store, TimeBackend(), FakeExecutor(), {}).run()
    return db


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run; exits when the command fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall_s = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{argv[-2:]} failed ({proc.returncode}): {proc.stderr.decode().strip()}")
    return wall_s, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=41, help="repetitions of each command (default 41)")
    ap.add_argument("--other", type=Path, help="also time `perfab list` of another checkout's src/")
    args = ap.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="perfab-startup-")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    db = small_store(cache)
    COMMANDS["perfab list"] = [sys.executable, "-c", ENTRY, "list", "--db", db]
    if args.other:
        first = f"import sys; sys.path.insert(0, {str(args.other.resolve())!r}); "
        COMMANDS["other perfab list"] = [sys.executable, "-c", first + ENTRY, "list", "--db", db]
    try:
        times, cpu = measure(env, args.reps)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    show(times, cpu, args.reps)
    return 0


def measure(env: dict[str, str], reps: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of every command, ``reps`` rotating rounds after one untimed warm-up round."""
    names = list(COMMANDS)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm the page cache and the bytecode caches once, untimed
        timed(COMMANDS[name], env)
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            wall_s, cpu_s = timed(COMMANDS[name], env)
            times[name].append(wall_s)
            cpu[name].append(cpu_s)
    return times, cpu


def show(times: dict[str, list[float]], cpu: dict[str, list[float]], reps: int) -> None:
    """The table of medians and ratios, and whether the goal is met."""
    names = list(times)
    floor = statistics.median(times[names[0]])
    cpu_floor = statistics.median(cpu[names[0]])
    print(f"{reps} repetitions each, alternating; per fresh process (load average {os.getloadavg()[0]:.1f})")
    print(f"{'command':<22} {'median ms':>10} {'min ms':>8} {'x floor':>8} {'CPU ms':>8} {'x floor':>8}")
    for name, walls in times.items():
        med, med_cpu = statistics.median(walls), statistics.median(cpu[name])
        print(f"{name:<22} {med * 1e3:>10.1f} {min(walls) * 1e3:>8.1f} {med / floor:>7.2f}x "
              f"{med_cpu * 1e3:>8.1f} {med_cpu / cpu_floor:>7.2f}x")
    worst = max(statistics.median(times[g]) / floor for g in GOALS)
    print(f"goal: --help, size --help and list within {GOAL_RATIO:.0f}x of python -c pass: "
          f"{'met' if worst <= GOAL_RATIO else 'NOT met'} (worst {worst:.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
