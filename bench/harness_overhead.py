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
  Its CPU time counts the server's processes too (/proc).

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
time of every way, much less their CPU time.  The runs' own CPU time
(exec of /bin/true, its cache misses stretched by other work) is most of
it; the harness column takes it out (the runs' wait4 rusage, summed by the
bare loop, stored by perfab), leaving what the way itself spent per run.

``--other DIR`` adds another checkout's perfab (its ``src``) beside this
one, e.g. the commit before a change, timed the same way in the same run.

``--instructions`` also counts the user-space instructions perfab's own
process executes per run (valgrind's cachegrind, the same slope between the
two session sizes, SQLite; the fork server and the runs are not traced):
a figure other work on the machine cannot move, for comparing two checkouts
on a loaded machine.  Not time: the kernel's share (system calls, context
switches, the WAL's writes) is not in it.

    PYTHONPATH=src .venv/bin/python bench/harness_overhead.py [--small 100] [--large 500] [--repeat 7]
        [--other OLD/src] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
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


def bare(runs: int) -> tuple[float, float, float]:
    """posix_spawn (vfork-style) and wait4, nothing else: (seconds, CPU seconds, the runs' own CPU seconds)
    for ``runs`` runs."""
    env = dict(os.environ)
    cpu = _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN)
    own = 0.0
    start = time.perf_counter()
    for _ in range(runs):
        usage = os.wait4(os.posix_spawn(TRUE, [TRUE], env), 0)[2]
        own += usage.ru_utime + usage.ru_stime
    took = time.perf_counter() - start
    return took, _cpu_s(resource.RUSAGE_SELF) + _cpu_s(resource.RUSAGE_CHILDREN) - cpu, own


def hyperfine(runs: int) -> tuple[float, float, None]:
    """``hyperfine -N --runs RUNS /bin/true`` as a whole process (the runs' own CPU time is not told)."""
    argv = ["hyperfine", "-N", "--runs", str(runs), "--warmup", "0", "--style", "none", TRUE]
    return (*_timed(argv, os.environ), None)


class Perfab:
    """``perfab run`` of /bin/true into one database, a fresh experiment (and spec file) each time."""

    def __init__(self, db: str, folder: Path, src: Path = REPO / "src", server_cpu: Callable[[], float] | None = None):
        self.db, self.folder, self.count = db, folder, 0
        self.env = {**os.environ, "PYTHONPATH": str(src)}
        self.server_cpu = server_cpu  # the database server's CPU seconds so far, counted with the session's

    def __call__(self, runs: int) -> tuple[float, float, float]:
        """(seconds, CPU seconds, the runs' own CPU seconds as perfab stored them) of one session; the CPU time
        is the database server's too where it has one."""
        before = self.server_cpu() if self.server_cpu else 0.0
        took, cpu, runs_cpu = self._session(runs)
        return took, cpu + (self.server_cpu() - before if self.server_cpu else 0.0), runs_cpu

    def _session(self, runs: int) -> tuple[float, float, float]:
        self.count += 1
        spec = self.folder / f"overhead{self.count}.toml"
        spec.write_text(f'[experiment]\nname = "overhead{self.count}"\nruns = {runs // 2}\nwarmup = 0\n\n'
                        '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n'
                        f'[[workload]]\nname = "true"\nargv = ["{TRUE}"]\n')
        argv = [sys.executable, "-c", "from perfab.cli import main_entry; main_entry()", "run", str(spec),
                "--db", self.db, "--no-report"]
        return (*_timed(argv, self.env), self.runs_cpu(f"overhead{self.count}"))

    def runs_cpu(self, name: str) -> float:
        """The user and system time of experiment ``name``'s runs (their wait4 rusage, as stored)."""
        query = ("SELECT coalesce(sum(r.user_s + r.sys_s), 0) FROM runs r JOIN planned_runs p ON p.id = r.planned_id "
                 "JOIN sessions s ON s.id = p.session_id JOIN experiments e ON e.id = s.experiment_id WHERE e.name = ")
        if self.db.startswith("postgresql:"):
            import psycopg

            with psycopg.connect(self.db) as conn:
                conn.execute("SET search_path TO perfab")
                return float(conn.execute(query + "%s", (name,)).fetchone()[0])
        with sqlite3.connect(self.db) as conn:
            return float(conn.execute(query + "?", (name,)).fetchone()[0])


def instructions(perfab: Perfab, runs: int) -> int:
    """User-space instructions of ``perfab run`` (its own process only) for a session of ``runs`` runs."""
    perfab.count += 1
    spec = perfab.folder / f"counted{perfab.count}.toml"
    spec.write_text(f'[experiment]\nname = "counted{perfab.count}"\nruns = {runs // 2}\nwarmup = 0\n\n'
                    '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n'
                    f'[[workload]]\nname = "true"\nargv = ["{TRUE}"]\n')
    argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable,
            "-c", "from perfab.cli import main_entry; main_entry()", "run", str(spec), "--db",
            str(perfab.folder / f"counted{perfab.count}.db"), "--no-report"]
    done = subprocess.run(argv, env=perfab.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    counted = [line for line in done.stderr.splitlines() if "I   refs:" in line or "I refs:" in line]
    if done.returncode != 0 or not counted:
        sys.exit(f"valgrind failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return int(counted[-1].split()[-1].replace(",", ""))


def count_instructions(folder: Path, other: Path | None, small: int, large: int) -> None:
    """Print perfab's own instructions per run (``instructions``) for this checkout and ``other``."""
    if shutil.which("valgrind") is None:
        print("\ninstructions: left out (valgrind is not installed; `make sysdeps` installs it)")
        return
    print(f"\nuser-space instructions of perfab's own process per run (cachegrind, slope {small}-{large} runs, "
          "SQLite):")
    checkouts = {"perfab": REPO / "src", **({"other": other} if other is not None else {})}
    counted = {}
    for name, src in checkouts.items():
        (folder / name).mkdir()
        perfab = Perfab("", folder / name, src)  # its own folder: a store of its own
        counted[name] = (instructions(perfab, large) - instructions(perfab, small)) / (large - small)
        ratio = f"  ({counted[name] / counted['perfab']:.2f}x perfab's)" if name != "perfab" else ""
        print(f"  {name:18s} {counted[name]:10,.0f}{ratio}")


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


def server_cpu(server) -> Callable[[], float]:
    """The PostgreSQL server's CPU seconds so far: the postmaster's, its reaped children's (the backends of
    sessions that ended) and its live children's (/proc; 0 where unreadable)."""
    tick = os.sysconf("SC_CLK_TCK")

    def fields(pid: str) -> list[str]:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return []

    def read() -> float:
        try:
            master = (server.data / "postmaster.pid").read_text().split()[0]
        except (OSError, IndexError):
            return 0.0
        ticks = sum(map(int, fields(master)[11:15]))
        for pid in filter(str.isdigit, os.listdir("/proc")):
            f = fields(pid)
            if len(f) > 12 and f[1] == master:
                ticks += int(f[11]) + int(f[12])
        return ticks / tick

    return read


Way = Callable[[int], tuple[float, float, float | None]]  # runs -> (seconds, CPU seconds, the runs' own CPU s)


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
        found["perfab PostgreSQL"] = Perfab(url, folder, server_cpu=server_cpu(server))
        if other is not None:
            found["other PostgreSQL"] = Perfab(server.new_database(), folder, other, server_cpu(server))
    return found, server


Timing = dict[str, tuple]  # way -> (wall, CPU, harness CPU) at the small size, then at the large one, s
# (harness CPU: the way's CPU time less the runs' own, None where the runs' own is not told)


def repetition(i: int, found: dict[str, Way], small: int, large: int) -> Timing:
    """Each way timed at ``small`` and ``large`` runs, the ways in an order rotated by ``i``."""
    names = list(found)
    order = names[i % len(names):] + names[:i % len(names)]
    times = {}
    for name in order:
        times[name] = tuple(_harness(*found[name](small))) + tuple(_harness(*found[name](large)))
    return {name: times[name] for name in names}


def _harness(wall: float, cpu: float, runs_cpu: float | None) -> tuple[float, float, float | None]:
    return wall, cpu, None if runs_cpu is None else cpu - runs_cpu


def slopes(times: Timing, small: int, large: int) -> dict[str, tuple]:
    """Each way's (wall, CPU, harness CPU) slope in ms per run (harness CPU None where not told)."""
    per = 1e3 / (large - small)
    return {name: tuple(None if a is None or b is None else (b - a) * per for a, b in zip(t[:3], t[3:]))
            for name, t in times.items()}


def floor_slopes(timings: list[Timing], small: int, large: int) -> dict[str, float]:
    """Each way's wall slope between its fastest session of each size over all repetitions: a delay from
    other work only ever adds, so the minima come nearest the quiet machine (hyperfine also reports min)."""
    per = 1e3 / (large - small)
    return {name: (min(t[name][3] for t in timings) - min(t[name][0] for t in timings)) * per
            for name in timings[0]}


def report(timings: list[Timing], small: int, large: int) -> None:
    """The tables: median slopes, their range, and the median paired differences to bare, against the goals."""
    slopes_ = [slopes(t, small, large) for t in timings]
    print(f"\nmarginal ms per run of {TRUE} (slope between {small} and {large} runs), "
          f"median of {len(slopes_)} interleaved repetitions; vs bare: the median of each repetition's "
          "difference to its bare loop")
    _wall_table(slopes_)
    _cpu_table(slopes_)
    floors = floor_slopes(timings, small, large)
    print("\nwall from the fastest session of each size (min over the repetitions), ms per run:")
    for name, value in floors.items():
        over = value - floors["bare"]
        added = "" if name == "bare" else f"  {over:+.3f} vs bare"
        print(f"  {name:18s} {value:6.3f}{added}{_verdict(name, over, '  ')}")


def _verdict(name: str, over: float, lead: str = "") -> str:
    goal = GOALS.get(name)
    return "" if goal is None else f"{lead}(goal <= +{goal:.1f}: {'met' if over <= goal else 'NOT met'})"


def _median(slopes: list[dict], name: str, i: int, less_bare: bool = False) -> float | None:
    values = [s[name][i] - (s["bare"][i] if less_bare else 0.0) for s in slopes if s[name][i] is not None]
    return statistics.median(values) if values else None


def _wall_table(slopes: list[dict]) -> None:
    print(f"  {'way':18s} {'wall':>6s} {'range':>12s} {'vs bare':>9s} {'ratio':>6s}")
    floor = _median(slopes, "bare", 0)
    for name in slopes[0]:
        walls = [s[name][0] for s in slopes]
        mid = statistics.median(walls)
        line = f"  {name:18s} {mid:6.3f} {f'{min(walls):.2f}-{max(walls):.2f}':>12s}"
        if name != "bare":
            added = _median(slopes, name, 0, True)
            line += f" {added:+9.3f} {mid / floor:5.2f}x  {_verdict(name, added)}"
        print(line)
    print("  wall: start to exit")


def _cpu_table(slopes: list[dict]) -> None:
    print(f"\n  {'way':18s} {'CPU':>6s} {'vs bare':>8s} {'harness':>8s} {'vs bare':>8s}")
    for name in slopes[0]:
        line = f"  {name:18s} {_median(slopes, name, 1):6.3f}"
        harness = _median(slopes, name, 2)
        if name != "bare":
            line += f" {_median(slopes, name, 1, True):+8.3f}"
        else:
            line += f" {'':8s}"
        if harness is not None:
            line += f" {harness:8.3f}"
            if name != "bare":
                added = _median(slopes, name, 2, True)
                line += f" {added:+8.3f}  {_verdict(name, added)}"
        print(line)
    print("  CPU: user + system time of the way's processes (perfab, its exec server, the runs, and the\n"
          "  PostgreSQL server's processes for PostgreSQL); harness: CPU less the runs' own (their wait4 rusage):\n"
          "  what the way itself spent, with the runs' own CPU time, which other work stretches most, taken out")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=100, help="runs in the short session (default 100)")
    ap.add_argument("--large", type=int, default=500, help="runs in the long session (default 500)")
    ap.add_argument("--repeat", type=int, default=7, help="interleaved repetitions (default 7)")
    ap.add_argument("--other", type=Path, help="also time the perfab of another checkout's src/ (e.g. an "
                    "older commit's, from `git worktree add`), as the columns 'other ...'")
    ap.add_argument("--instructions", action="store_true", help="also count perfab's own user-space instructions "
                    "per run under valgrind (a figure the machine's load cannot move)")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="perfab-overhead-"))
    found, server = ways(folder, print, args.other.resolve() if args.other else None)
    try:
        repetition(0, found, 10, 20)  # warms caches, builds perfab's exec helper if needed
        timings = []
        for i in range(args.repeat):
            timings.append(repetition(i, found, args.small, args.large))
            print(f"repetition {i} (wall/CPU/harness CPU ms per run): " + ", ".join(
                f"{k} " + "/".join("-" if v is None else f"{v:.3f}" for v in t)
                for k, t in slopes(timings[-1], args.small, args.large).items()), flush=True)
        report(timings, args.small, args.large)
        if args.instructions:
            count_instructions(folder, args.other.resolve() if args.other else None, args.small, args.large)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} CPUs")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
