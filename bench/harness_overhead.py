"""Harness overhead: perfab running `true` against a bare fork/exec/wait4 loop.

Both loops run in this one process, interleaved in rounds (these machines
are noisy): a round is ``--runs`` bare executions of /bin/true
(``posix_spawn`` + ``wait4``: no pipes, no rusage kept, nothing stored), then a
perfab session of ``--runs`` runs of /bin/true (spec -> plan -> executor ->
store, a commit per run).  Prints the added milliseconds per run, per round
and as the median over rounds (target <= 1 ms).

    .venv/bin/python bench/harness_overhead.py [--runs 200] [--rounds 5]
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


def bare(runs: int) -> float:
    """The leanest spawn Python has: posix_spawn (vfork-style, no page-table copy) and wait4."""
    env = dict(os.environ)
    start = time.perf_counter()
    for _ in range(runs):
        pid = os.posix_spawn(TRUE, [TRUE], env)
        os.wait4(pid, 0)
    return time.perf_counter() - start


def harness(runs: int, db: Path, name: str) -> float:
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
    with Store(db) as store:
        start = time.perf_counter()
        Runner(spec, store, TimeBackend(), RealExecutor(), {}).run()
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    db = Path(tempfile.mkdtemp(prefix="perfab-overhead-")) / "overhead.db"
    added = []
    for i in range(args.rounds):
        b = bare(args.runs)
        h = harness(args.runs, db, f"overhead{i}")
        added.append((h - b) / args.runs * 1e3)
        print(f"round {i}: bare {b / args.runs * 1e3:.3f} ms/run, perfab {h / args.runs * 1e3:.3f} ms/run, "
              f"added {added[-1]:+.3f} ms/run, ratio {h / b:.2f}")
    print(f"median added per run: {statistics.median(added):+.3f} ms  (target <= 1 ms)")


if __name__ == "__main__":
    main()
