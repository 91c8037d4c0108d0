"""Harness overhead: perfab running `true` against a bare posix_spawn/wait4 loop.

All loops run in this one process, interleaved in rounds (these machines
are noisy; the order rotates from round to round).  A round is ``--runs``
bare executions of /bin/true (``posix_spawn`` + ``wait4``: no pipes, no
rusage kept, nothing stored), then for each way perfab can spawn:

- ``server``: the perfab-exec fork server (the default), and
- ``direct``: posix_spawn straight from perfab (the no-compiler fallback,
  which cannot tell a small workload's max RSS),

a perfab session of ``--runs`` runs of /bin/true (spec -> plan -> executor
-> store, a commit per run) and, apart, ``--runs`` bare calls of the
executor alone.  Prints the added milliseconds per run, per round and as the
median over rounds (target <= 1 ms for the server).

    .venv/bin/python bench/harness_overhead.py [--runs 200] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from perfab.run.backends import TimeBackend  # noqa: E402
from perfab.run.executor import RealExecutor  # noqa: E402
from perfab.run.runner import Runner  # noqa: E402
from perfab.spec import parse_spec  # noqa: E402
from perfab.store import Store  # noqa: E402

TRUE = "/bin/true"
WAYS = {"server": True, "direct": False}  # name: RealExecutor(use_helper=...)


def bare(runs: int) -> float:
    """The leanest spawn Python has: posix_spawn (vfork-style, no page-table copy) and wait4."""
    env = dict(os.environ)
    start = time.perf_counter()
    for _ in range(runs):
        pid = os.posix_spawn(TRUE, [TRUE], env)
        os.wait4(pid, 0)
    return time.perf_counter() - start


def harness(runs: int, db: Path, name: str, use_helper: bool) -> float:
    """A whole perfab session: the executor's server starts inside the timed part."""
    spec = parse_spec(f"""
[experiment]
name = "{name}"
runs = {runs // 2}
warmup = 0
[[variant]]
name = "a"
[[variant]]
name = "b"
[[workload]]
name = "true"
argv = ["{TRUE}"]
""", "overhead.toml")
    with Store(db) as store, RealExecutor(use_helper) as executor:
        start = time.perf_counter()
        Runner(spec, store, TimeBackend(), executor, {}).run()
        return time.perf_counter() - start


def executor_only(runs: int, use_helper: bool) -> float:
    """The executor alone (pipes, watch thread, rusage), no runner and no store."""
    env = dict(os.environ, LC_ALL="C")
    with RealExecutor(use_helper) as executor:
        start = time.perf_counter()
        for _ in range(runs):
            executor.execute([TRUE], env, None, 10.0, 65536, None)
        return time.perf_counter() - start


def one_round(i: int, runs: int, db: Path) -> dict[str, float]:
    """Seconds per run for each loop, in an order that rotates with ``i``."""
    loops = {"bare": lambda: bare(runs)}
    for way, helper in WAYS.items():
        loops[way] = lambda helper=helper, way=way: harness(runs, db, f"overhead{i}{way}", helper)
        loops[f"{way} executor"] = lambda helper=helper: executor_only(runs, helper)
    names = list(loops)
    seconds = {name: loops[name]() / runs for name in names[i % len(names):] + names[:i % len(names)]}
    return {name: seconds[name] for name in names}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    db = Path(tempfile.mkdtemp(prefix="perfab-overhead-")) / "overhead.db"
    one_round(0, 20, db)  # builds the helper if needed, warms the caches
    added: dict[str, list[float]] = {}
    for i in range(args.rounds):
        t = one_round(i, args.runs, db)
        row = [f"round {i}: bare {t['bare'] * 1e3:.3f} ms/run"]
        for name in t:
            if name != "bare":
                added.setdefault(name, []).append((t[name] - t["bare"]) * 1e3)
                row.append(f"{name} {added[name][-1]:+.3f}")
        print(", ".join(row))
    print("median added per run (perfab session, or the executor alone, minus bare posix_spawn+wait4):")
    for name, values in added.items():
        target = "  (target <= 1 ms)" if name == "server" else ""
        print(f"  {name:16s} {statistics.median(values):+.3f} ms{target}")


if __name__ == "__main__":
    main()
