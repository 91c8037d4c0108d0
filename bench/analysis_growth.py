"""How the cost of ``perfab report`` and ``perfab history`` grows with the runs stored, old code beside new.

Builds one SQLite store per size with the fake executor (nothing runs): one
experiment, two sides, sessions of ``--per-session`` runs per side, 8 metrics
per run (a continuous rate, a whole count, and the 6 rusage figures); past
ten sessions, the sessions are copies of those ten with their samples
jittered (``build``), so a million runs take a minute to store.  Then
``perfab report`` and ``perfab history`` run on each store in a fresh
interpreter, once with this checkout's ``src`` and once with the tree of
``--old`` (a git revision, exported with ``git archive``), one after the
other in the same run, and the wall time and peak RSS of each child
(``os.wait4``) are printed with their ratio and whether the two outputs are
byte-identical.  A child that fails prints its last line instead
(a traceback at sizes where the old code built all pairwise differences).
Start-up (``perfab --help``) is measured the same way, beside ``python -c pass``.
The old code runs only up to ``--old-max`` runs (it needed 23 GB at
100,000); ``html`` is ``perfab report --format html`` and ``list`` is
``perfab list``; under each row, the lines of its output (the HTML page's
bytes, against its 2 MB bound).  With ``--postgres`` each store is also copied into a
throwaway PostgreSQL server (started as the tests start one) and the
commands run on it.

    .venv/bin/python bench/analysis_growth.py [--runs 1000,10000,100000,1000000] [--old c835a2f]
        [--old-max 10000] [--commands report,history,html,list] [--postgres] [--timeout 900]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from perfab.run.backends import TimeBackend  # noqa: E402
from perfab.run.executor import FakeExecutor, FakeOutcome  # noqa: E402
from perfab.run.runner import Runner  # noqa: E402
from perfab.specfile import parse_spec  # noqa: E402
from perfab.store import Store  # noqa: E402

SPEC = """[experiment]
name = "growth"
runs = {runs}
warmup = 0
seed = {seed}
[[variant]]
name = "base"
[[variant]]
name = "new"
[[workload]]
name = "w"
argv = ["bench", "{{variant}}"]
parser = "keyvalue"
[[workload.metric]]
name = "ops/s"
direction = "higher"
[[workload.metric]]
name = "faults"
direction = "lower"
"""
CLI = "import sys; from perfab.cli import main; sys.exit(main(sys.argv[1:]))"


def behaviour(seed: int):
    """``new`` 1% faster with 1% noise; ``faults`` a whole count near 1000 on both sides."""
    rng = random.Random(seed)

    def run(argv, env):
        speed = 1.01 if argv[1] == "new" else 1.0
        out = f"ops/s: {1e6 * speed * (1 + rng.gauss(0, 0.01)):.1f}\nfaults: {round(rng.gauss(1000, 30))}\n"
        return FakeOutcome(wall_s=0.01 * (1 + rng.gauss(0, 0.01)) / speed, stdout=out.encode())

    return run


def build(db: Path, runs: int, per_session: int) -> None:
    """A store of ``runs`` runs: a few sessions run by the runner, the rest copied from them in SQL.

    Runner sessions cost about a millisecond per run, so only ``TEMPLATES`` of them are run; each further
    session copies one of them (its spec, plan and runs) with every sample moved by a uniform jitter of
    up to 1% (whole counts stay whole) and its start an hour later, so sessions differ as nightly ones do."""
    sessions = max(1, runs // (2 * per_session))
    with Store(db) as store:
        for s in range(min(sessions, TEMPLATES)):
            spec = parse_spec(SPEC.format(runs=per_session, seed=s + 1))
            Runner(spec, store, TimeBackend(), FakeExecutor(behaviour(s)), {}).run()
    if sessions > TEMPLATES:
        copy_sessions(db, sessions - TEMPLATES)


TEMPLATES = 10  # sessions the runner runs; the rest are copies of them (``build``)


def copy_sessions(db: Path, copies: int) -> None:
    """Append ``copies`` sessions to ``db``, copy k of template session k mod TEMPLATES + 1 (ids by offset)."""
    import sqlite3

    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA foreign_keys=OFF")
    plans = con.execute("SELECT count(*) FROM planned_runs WHERE session_id = 1").fetchone()[0]
    runs = con.execute("SELECT count(*) FROM runs r JOIN planned_runs p ON p.id = r.planned_id "
                       "WHERE p.session_id = 1").fetchone()[0]
    if con.execute("SELECT count(*) FROM runs").fetchone()[0] != runs * TEMPLATES:
        raise SystemExit("template sessions were retried: their runs are not numbered by offset")
    jitter = "(1 + (abs(random()) % 20001 - 10000) / 1e6)"
    con.execute("BEGIN")
    con.execute("CREATE TEMP TABLE k (k INTEGER PRIMARY KEY, src INTEGER NOT NULL)")
    con.executemany("INSERT INTO k VALUES (?, ?)", [(TEMPLATES + i, i % TEMPLATES) for i in range(copies)])
    cols = ("experiment_id, started_at, finished_at, status, side, spec_path, spec_text, spec_hash, backend, "
            "groups_json, environment_json, owner, host, sources_json, stop_reason")
    sel = cols.replace("started_at", "started_at + 3600 * (k.k - k.src)").replace(
        "finished_at", "finished_at + 3600 * (k.k - k.src)")
    con.execute(f"INSERT INTO sessions (id, {cols}) SELECT k.k + 1, {sel} FROM k JOIN sessions s "
                "ON s.id = k.src + 1 ORDER BY k.k")
    con.execute("INSERT INTO planned_runs (id, session_id, seq, workload, variant, grp, warmup, block, params_json) "
                f"SELECT p.id + {plans} * (k.k - k.src), k.k + 1, p.seq, p.workload, p.variant, p.grp, p.warmup, "
                "p.block, p.params_json FROM k JOIN planned_runs p ON p.session_id = k.src + 1 ORDER BY k.k, p.seq")
    rcols = ("attempt, status, reason, wall_s, user_s, sys_s, max_rss_kb, nvcsw, nivcsw, exit_code, signal, "
             "timed_out, stdout, stderr, stdout_bytes, stderr_bytes, notes_json")
    con.execute(f"INSERT INTO runs (id, planned_id, started_at, {rcols}) SELECT r.id + {runs} * (k.k - k.src), "
                f"r.planned_id + {plans} * (k.k - k.src), r.started_at + 3600 * (k.k - k.src), {rcols} "
                "FROM k JOIN planned_runs p ON p.session_id = k.src + 1 JOIN runs r ON r.planned_id = p.id "
                "ORDER BY k.k, r.id")
    con.execute(f"INSERT INTO samples (run_id, metric, value, source) SELECT sa.run_id + {runs} * (k.k - k.src), "
                f"sa.metric, CASE WHEN sa.value = round(sa.value) THEN round(sa.value * {jitter}) "
                f"ELSE sa.value * {jitter} END, sa.source FROM k JOIN planned_runs p ON p.session_id = k.src + 1 "
                "JOIN runs r ON r.planned_id = p.id JOIN samples sa ON sa.run_id = r.id ORDER BY k.k, sa.run_id")
    con.execute("COMMIT")
    con.close()


def child(src: Path, argv: list[str], timeout: float) -> tuple[float, int, bytes, str | None]:
    """(wall s, peak RSS KiB, stdout, error line or None) of one command in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=out, stderr=err)
        deadline = t + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = -9
                return time.perf_counter() - t, usage.ru_maxrss, b"", f"killed after {timeout:.0f} s"
            time.sleep(0.02)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = err.read().decode(errors="replace").strip().splitlines()
        why = text[-1] if text else (f"killed by signal {-proc.returncode}" if proc.returncode < 0 else "failed")
        return wall, usage.ru_maxrss, out.read(), why if proc.returncode else None


def export(rev: str, into: Path) -> Path:
    """The ``src`` tree of git revision ``rev``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def row(label: str, old, new) -> str:
    """One printed row: old and new (wall, peak RSS, or the failure), their ratio, whether the outputs match."""
    def cell(r):
        if r is None:
            return "not run"
        return f"{r[0]:8.2f} s {r[1] / 1024:7.0f} MB" if r[3] is None else f"{r[3][:38]:>38}"
    both = old is not None and old[3] is None and new[3] is None
    ratio = f"{old[0] / new[0]:7.1f}x" if both else "      -"
    same = ("same" if old[2] == new[2] else "DIFFERS") if both else ""
    return f"{label:<36} {cell(old):>38}  {cell(new):>20}  {ratio}  {same}"


def startup(old_src: Path, new_src: Path, repeat: int) -> None:
    runs = {"python -c pass": [], "old --help": [], "new --help": []}
    for _ in range(repeat):
        runs["python -c pass"].append(child(new_src, ["-c", "pass"], 60)[0])
        runs["old --help"].append(child(old_src, ["-c", CLI, "--help"], 60)[0])
        runs["new --help"].append(child(new_src, ["-c", CLI, "--help"], 60)[0])
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"start-up (median of {repeat}): python -c pass {med['python -c pass']:.3f} s, "
          f"old --help {med['old --help']:.3f} s, new --help {med['new --help']:.3f} s "
          f"({med['old --help'] / med['new --help']:.1f}x faster; {med['new --help'] / med['python -c pass']:.1f}x "
          f"python -c pass)")


COMMANDS = {  # command name -> its arguments after the perfab program (the store's --db is added)
    "report": ["report"],
    "history": ["history"],
    "html": ["report", "--format", "html"],
    "list": ["list"],
}


HTML_BOUND = 2_000_000  # bytes: the page stays under 2 MB at any size (each plot draws at most 1,000 runs)


def measure(label: str, db: str, args, old_src: Path | None, runs: int) -> None:
    """One row per command on ``db``: old beside new while ``runs`` is within --old-max, new alone beyond; the
    text report's lines and the HTML page's bytes (against ``HTML_BOUND``) beside them."""
    for command in args.commands.split(","):
        argv = ["-c", CLI, *COMMANDS[command], "--db", db]
        new = child(ROOT / "src", argv, args.timeout)
        old = child(old_src, argv, args.timeout) if old_src and runs <= args.old_max else None
        print(row(f"{command} @ {runs:,}{label}", old, new), flush=True)
        print("    " + _size(command, old, new), flush=True)


def _size(command: str, old, new) -> str:
    """How big the outputs are: lines of a text output, bytes of the HTML page against its bound."""
    if command == "html":
        ok = "met" if new[3] is None and len(new[2]) < HTML_BOUND else "NOT met"
        before = f"; old {len(old[2]) / 1e6:.2f} MB" if old is not None and old[3] is None else ""
        return f"page {len(new[2]) / 1e6:.2f} MB (bound {HTML_BOUND / 1e6:.0f} MB: {ok}){before}"
    before = f"; old {len(old[2].splitlines()):,}" if old is not None and old[3] is None else ""
    return f"output {len(new[2].splitlines()):,} lines{before}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default="1000,10000,100000,1000000", help="stored runs per store, comma-separated")
    p.add_argument("--per-session", type=int, default=50, help="runs per side in each session (default 50)")
    p.add_argument("--old", default="c835a2f", help="git revision of the old code (default: before the speed work)")
    p.add_argument("--old-max", type=int, default=10_000,
                   help="largest store the old code is run on (default 10,000: at 100,000 it needed 23 GB)")
    p.add_argument("--timeout", type=float, default=900, help="seconds before a child is killed (default 900)")
    p.add_argument("--commands", default="report,history,html,list",
                   help="commands to time, of " + ",".join(COMMANDS) + " (default all)")
    p.add_argument("--postgres", action="store_true",
                   help="also time each store copied into a throwaway PostgreSQL server (as the tests start one)")
    p.add_argument("--repeat", type=int, default=5, help="start-up measurements of each (default 5)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_src, new_src = export(args.old, Path(tmp)), ROOT / "src"
        startup(old_src, new_src, args.repeat)
        server = postgres_server() if args.postgres else None
        try:
            print(f"{'command @ runs':<24} {'old (' + args.old + ')':>38}  {'new':>20}  {'ratio':>7}  output")
            for runs in (int(x) for x in args.runs.split(",")):
                db = Path(tmp) / f"growth-{runs}.db"
                t = time.perf_counter()
                build(db, runs, args.per_session)
                print(f"built {runs:,} runs in {time.perf_counter() - t:.1f} s, {db.stat().st_size / 2**20:.1f} MB "
                      f"({db.stat().st_size / runs:,.0f} bytes per run)", flush=True)
                measure("", str(db), args, old_src, runs)
                if server is not None:
                    url = server.new_database()
                    t = time.perf_counter()
                    size = copy_to_postgres(db, url)
                    print(f"copied into PostgreSQL in {time.perf_counter() - t:.1f} s, {size / 2**20:.1f} MB "
                          f"({size / runs:,.0f} bytes per run)", flush=True)
                    measure(" (PostgreSQL)", url, args, None, runs)
                db.unlink()
        finally:
            if server is not None:
                server.stop()
    return 0


def postgres_server():
    """A throwaway server (``tests/store_contract/pg_server.py``); None, with the reason, when there is none."""
    sys.path.insert(0, str(ROOT / "tests" / "store_contract"))
    from pg_server import PgServer, Unavailable

    try:
        return PgServer().start()
    except Unavailable as e:
        print(f"PostgreSQL: not measured ({e})")
        return None


TABLES = ("experiments", "sessions", "planned_runs", "runs", "samples", "exclusions", "metric_meta", "profile_shares")


def copy_to_postgres(db: Path, url: str) -> int:
    """Every row of the SQLite store ``db`` copied into perfab's schema at ``url`` (COPY); the database's bytes."""
    import sqlite3

    from perfab.store.postgres import PostgresStore

    PostgresStore(url).close()  # creates the schema at the current version
    import psycopg

    lite = sqlite3.connect(db)
    with psycopg.connect(url, autocommit=True) as pg:
        for table in TABLES:
            cols = [r[1] for r in lite.execute(f"PRAGMA table_info({table})")]
            names = ", ".join(cols)
            with pg.cursor() as cur, cur.copy(f"COPY perfab.{table} ({names}) FROM STDIN") as copy:
                for r in lite.execute(f"SELECT {names} FROM {table}"):
                    copy.write_row(r)
        pg.execute("VACUUM ANALYZE")
        size = pg.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    lite.close()
    return size


if __name__ == "__main__":
    sys.exit(main())
