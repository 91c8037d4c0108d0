"""Harness overhead: what perfab adds per run of `/bin/true`, beside a bare loop and `hyperfine -N`.

Four ways to run /bin/true N times, each timed from outside as a whole:

- ``bare``: a posix_spawn + wait4 loop in this process (no pipes, no
  rusage kept, nothing stored): the floor;
- ``hyperfine -N``: hyperfine 1.15 without a shell (Debian's package; the
  column is left out, saying so, when it is not installed: ``make sysdeps``);
- ``perfab SQLite``: ``perfab run SPEC --db FILE --no-report``, its own
  process, two sides of N/2 runs each, every run committed before the next;
- ``perfab PostgreSQL``: the same with ``--db postgresql://...`` on a
  throwaway local server started here as the tests start theirs (initdb in
  a temp dir, Unix socket, ``fsync=off``: each commit still waits for the
  server, not for its disk); left out, saying why, when none can start.

The marginal cost per run is the slope between N = ``--small`` and N =
``--large`` runs, (t_large - t_small) / (large - small): start-up, imports,
planning and the session's bookkeeping cancel.  The ways run interleaved,
in an order that rotates each repetition, so a change in the machine's
load falls on all of them; printed are the median slope over
``--repeat`` repetitions (and its range), and the median of each
repetition's difference to the bare loop of the same repetition, against
the goals: at most +0.3 ms per run with SQLite, +0.5 ms with PostgreSQL.
A second table takes each way's fastest session of each size over all
repetitions (other work only ever delays a session) for the slope.
Beside the wall time, the CPU time the way's processes used (getrusage of
the reaped children): other work on a shared machine stretches the wall
time of every way, much less their CPU time.

``--other DIR`` adds another checkout's perfab (its ``src``) beside this
one, e.g. the commit before a change, timed the same way in the same run.

    PYTHONPATH=src .venv/bin/python bench/harness_overhead.py [--small 100] [--large 500] [--repeat 7]
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
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
TRUE = "/bin/true"
GOALS = {"perfab SQLite": 0.3, "perfab PostgreSQL": 0.5}  # ms per run above bare


def bare(runs: int) -> tuple[float, float]:
    """posix_spawn (vfork-style) and wait4, nothing else: (seconds, CPU seconds) for ``runs`` runs."""
    env = dict(os.environ)
    cpu = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for _ in range(runs):
        os.wait4(os.posix_spawn(TRUE, [TRUE], env), 0)
    took = time.perf_counter() - start
    return took, _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN) - cpu


def hyperfine(runs: int) -> tuple[float, float]:
    """``hyperfine -N --runs RUNS /bin/true`` as a whole process."""
    argv = ["hyperfine", "-N", "--runs", str(runs), "--warmup", "0", "--style", "none", TRUE]
    return _timed(argv, os.environ)


class Perfab:
    """``perfab run`` of /bin/true into one database, a fresh experiment (and spec file) each time."""

    def __init__(self, db: str, folder: Path, src: Path = REPO / "src"):
        self.db, self.folder, self.count = db, folder, 0
        self.env = {**os.environ, "PYTHONPATH": str(src)}

    def __call__(self, runs: int) -> tuple[float, float]:
        self.count += 1
        spec = self.folder / f"overhead{self.count}.toml"
        spec.write_text(f'[experiment]\nname = "overhead{self.count}"\nruns = {runs // 2}\nwarmup = 0\n\n'
                        '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n'
                        f'[[workload]]\nname = "true"\nargv = ["{TRUE}"]\n')
        argv = [sys.executable, "-c", "from perfab.cli import main_entry; main_entry()", "run", str(spec),
                "--db", self.db, "--no-report"]
        return _timed(argv, self.env)


def _timed(argv: list[str], env) -> tuple[float, float]:
    """(seconds ``argv`` took start to exit, CPU seconds of it and every process it reaped); its output is
    dropped, a failure stops the bench."""
    cpu = _cpu_s(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{argv[0]} failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()[-400:]}")
    return took, _cpu_s(resource.RUSAGE_CHILDREN) - cpu


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def postgres(folder: Path, say: Callable[[str], None]):
    """A started throwaway server (the tests' ``PgServer``) and a database URL on it, or (None, None)."""
    sys.path.insert(0, str(REPO / "tests" / "store_contract"))
    try:
        from pg_server import PgServer, Unavailable
    except ImportError as e:
        say(f"perfab PostgreSQL: left out ({e})")
        return None, None
    try:
        import psycopg  # noqa: F401
        server = PgServer().start()
    except (Unavailable, ImportError) as e:
        say(f"perfab PostgreSQL: left out ({e})")
        return None, None
    return server, server.new_database()


Way = Callable[[int], tuple[float, float]]  # runs -> (seconds, CPU seconds)


def ways(folder: Path, say: Callable[[str], None], other: Path | None) -> tuple[dict[str, Way], object]:
    """The ways to time, by column name, and the PostgreSQL server to stop afterwards (or None); with
    ``other`` (another checkout's ``src``), its perfab too, into databases of its own."""
    found: dict[str, Way] = {"bare": bare}
    if shutil.which("hyperfine"):
        found["hyperfine -N"] = hyperfine
    else:
        say("hyperfine -N: left out (not installed; `make sysdeps` installs Debian's hyperfine)")
    found["perfab SQLite"] = Perfab(str(folder / "overhead.db"), folder)
    if other is not None:
        found["other SQLite"] = Perfab(str(folder / "other.db"), folder, other)
    server, url = postgres(folder, say)
    if url is not None:
        found["perfab PostgreSQL"] = Perfab(url, folder)
        if other is not None:
            found["other PostgreSQL"] = Perfab(server.new_database(), folder, other)
    return found, server


Timing = dict[str, tuple[float, float, float, float]]  # way -> (wall small, wall large, CPU small, CPU large), s


def repetition(i: int, found: dict[str, Way], small: int, large: int) -> Timing:
    """Each way timed at ``small`` and ``large`` runs, the ways in an order rotated by ``i``."""
    names = list(found)
    order = names[i % len(names):] + names[:i % len(names)]
    times = {}
    for name in order:
        t_small, cpu_small = found[name](small)
        t_large, cpu_large = found[name](large)
        times[name] = (t_small, t_large, cpu_small, cpu_large)
    return {name: times[name] for name in names}


def slopes(times: Timing, small: int, large: int) -> dict[str, tuple[float, float]]:
    """Each way's (wall, CPU) slope in ms per run."""
    per = 1e3 / (large - small)
    return {name: ((tl - ts) * per, (cl - cs) * per) for name, (ts, tl, cs, cl) in times.items()}


def floor_slopes(timings: list[Timing], small: int, large: int) -> dict[str, float]:
    """Each way's wall slope between its fastest session of each size over all repetitions: a delay from
    other work only ever adds, so the minima come nearest the quiet machine (hyperfine also reports min)."""
    per = 1e3 / (large - small)
    return {name: (min(t[name][1] for t in timings) - min(t[name][0] for t in timings)) * per
            for name in timings[0]}


def report(timings: list[Timing], small: int, large: int) -> None:
    """The table: median slope, its range, and the median paired difference to bare, against the goals."""
    floors = floor_slopes(timings, small, large)
    slopes_ = [slopes(t, small, large) for t in timings]
    _table(slopes_, small, large)
    print("\nfrom the fastest session of each size (min over the repetitions), ms per run:")
    for name, value in floors.items():
        over = value - floors["bare"]
        added = "" if name == "bare" else f"  {over:+.3f} vs bare"
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"  (goal <= +{goal:.1f}: {'met' if over <= goal else 'NOT met'})"
        print(f"  {name:18s} {value:6.3f}{added}{verdict}")


def _table(slopes: list[dict[str, tuple[float, float]]], small: int, large: int) -> None:
    print(f"\nmarginal ms per run of {TRUE} (slope between {small} and {large} runs), "
          f"median of {len(slopes)} interleaved repetitions:")
    print(f"  {'way':18s} {'wall':>6s} {'range':>12s} {'vs bare':>9s} {'ratio':>6s} {'CPU':>6s} {'vs bare':>8s}  goal")
    floor = statistics.median(s["bare"][0] for s in slopes)
    for name in slopes[0]:
        walls = [s[name][0] for s in slopes]
        mid = statistics.median(walls)
        cpu = statistics.median(s[name][1] for s in slopes)
        line = f"  {name:18s} {mid:6.3f} {f'{min(walls):.2f}-{max(walls):.2f}':>12s}"
        if name == "bare":
            print(f"{line} {'':9s} {'':6s} {cpu:6.3f}")
            continue
        added = statistics.median(s[name][0] - s["bare"][0] for s in slopes)
        added_cpu = statistics.median(s[name][1] - s["bare"][1] for s in slopes)
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"<= +{goal:.1f} ms: {'met' if added <= goal else 'NOT met'}"
        print(f"{line} {added:+9.3f} {mid / floor:5.2f}x {cpu:6.3f} {added_cpu:+8.3f}  {verdict}")
    print("wall: start to exit; CPU: user + system time of the way's processes (perfab, its exec server, the\n"
          "runs; not the PostgreSQL server's); vs bare: median of each repetition's difference to its bare loop")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=100, help="runs in the short session (default 100)")
    ap.add_argument("--large", type=int, default=500, help="runs in the long session (default 500)")
    ap.add_argument("--repeat", type=int, default=7, help="interleaved repetitions (default 7)")
    ap.add_argument("--other", type=Path, help="also time the perfab of another checkout's src/ (e.g. an "
                    "older commit's, from `git worktree add`), as the columns 'other ...'")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="perfab-overhead-"))
    found, server = ways(folder, print, args.other.resolve() if args.other else None)
    try:
        repetition(0, found, 10, 20)  # warms caches, builds perfab's exec helper if needed
        timings = []
        for i in range(args.repeat):
            timings.append(repetition(i, found, args.small, args.large))
            print(f"repetition {i} (wall/CPU ms per run): " + ", ".join(
                f"{k} {w:.3f}/{c:.3f}" for k, (w, c) in slopes(timings[-1], args.small, args.large).items()),
                flush=True)
        report(timings, args.small, args.large)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} CPUs")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
