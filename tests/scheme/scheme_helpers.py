"""The seed experiments of the counting-scheme tests: specs, per-side levels, running and reporting.

Seed 000 (``/work/shared/seeds/000_*``, db_bench deleteseq, inlined
``_raw_spin_unlock``): cycles, instructions and one L1i filter per run (three
PMU counters), 20 runs per side, 10 with ``:u`` and 10 with ``:k``.  Its
table::

    Instructions (total)    9,574,476,543   9,573,602,441    -0.01%   flat
    L1i-miss :k (kernel)      198,588,165     216,672,536    +9.11%   **
    L1i-miss :u (userspace)   593,276,235     616,433,813    +3.90%   **
    Throughput ops/s            431,398         432,897      +0.35%   ns
    Cycles (total)          4,681,002,302   4,665,106,876    -0.34%   ns
    Time elapsed (s)            2.4012          2.3865       -0.62%   ns

``LEVELS_000`` gives each side those means with per-run noise of the size
the seed reports (+-0.1..0.36% for the L1i counts, ~1% for cycles, time and
throughput, 0.02% for instructions).
"""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

from perfab.cli import main
from perfab.run.backends import make_backend
from perfab.run.executor import FakeExecutor
from perfab.run.runner import Runner
from perfab.specfile import parse_spec
from perfab.store import Store
from scheme_perf import FakePerf, Level

# Seed 000's machine (2x Xeon Gold 6138, lscpu -C), fixed so the SETUP block is stable.
FIXED_ENV = {
    "cpu.model": "Intel(R) Xeon(R) Gold 6138 CPU @ 2.00GHz",
    "cpu.sockets": "2",
    "cpu.cores": "40",
    "cpu.threads": "80",
    "kernel.release": "7.1.0-locking-core",
    "cache.L1d": "32K 8-way 64B, 64 sets, 40 instances (1.3M)",
    "cache.L1i": "32K 8-way 64B, 64 sets, 40 instances (1.3M)",
    "cache.L2": "1M 16-way 64B, 1024 sets, 40 instances (40M)",
    "cache.L3": "27.5M 11-way 64B, 40960 sets, 2 instances (55M)",
    "cpufreq.governor": "performance",
    "cpufreq.boost": "0",
    "cpu.smt": "on",
}

L1I_U, L1I_K = "L1-icache-load-misses:u", "L1-icache-load-misses:k"

SPEC_000 = """\
[experiment]
name = "rocksdb-deleteseq"
runs = 20
warmup = 1
seed = 3

[[variant]]
name = "outline"

[[variant]]
name = "inline"

[[workload]]
name = "rocksdb"
argv = ["./build/{variant}/db_bench", "-benchmarks=deleteseq"]
parser = "keyvalue"

[[workload.metric]]
name = "instructions"
label = "Instructions (total)"
margin = 0.1

[[workload.metric]]
name = "L1-icache-load-misses:k"
label = "L1i-miss :k (kernel)"

[[workload.metric]]
name = "L1-icache-load-misses:u"
label = "L1i-miss :u (userspace)"

[[workload.metric]]
name = "ops/s"
label = "Throughput ops/s"

[[workload.metric]]
name = "cycles"
label = "Cycles (total)"

[[workload.metric]]
name = "IPC"

[[workload.metric]]
name = "wall_s"
label = "Time elapsed (s)"

[measure]
backend = "perf"
counters = ["cycles", "instructions", "L1-icache-load-misses:u", "L1-icache-load-misses:k"]
max_events_per_run = 3
"""


def levels_000() -> dict[str, dict[str, Level]]:
    """Seed 000's rocksdb means per side (baseline ``outline``, experiment ``inline``)."""
    def side(insns, l1k, l1u, ops, cycles, wall):
        return {"instructions": Level(insns, 0.0002), L1I_K: Level(l1k, 0.003), L1I_U: Level(l1u, 0.003),
                "ops/s": Level(ops, 0.01), "cycles": Level(cycles, 0.01), "wall_s": Level(wall, 0.015)}

    return {"outline": side(9_574_476_543, 198_588_165, 593_276_235, 431_398, 4_681_002_302, 2.4012),
            "inline": side(9_573_602_441, 216_672_536, 616_433_813, 432_897, 4_665_106_876, 2.3865)}


def run_experiment(text: str, db: Path, perf: FakePerf, env: dict | None = None) -> FakeExecutor:
    """Run ``text`` through the real Runner and perf backend over ``perf``; return the executor."""
    exp = parse_spec(text, "scheme.toml")
    executor = FakeExecutor(perf)
    with Store(db) as store:
        result = Runner(exp, store, make_backend(exp.measure), executor, dict(env or FIXED_ENV)).run()
    assert result.status == "finished"
    return executor


def report(db: Path, fmt: str = "text") -> str:
    """``perfab report --db DB --format FMT``, in-process; fails the test on a non-zero exit."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["report", "--db", str(db), "--format", fmt], out, err)
    assert code == 0 and err.getvalue() == "", err.getvalue()
    return out.getvalue()


def stored_runs(db: Path) -> list[dict]:
    """Every stored run in plan order: seq, variant, warmup, status, reason, metrics, excluded."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        runs = con.execute("SELECT r.id, p.seq, p.variant, p.warmup, r.status, r.reason FROM runs r "
                           "JOIN planned_runs p ON p.id = r.planned_id ORDER BY p.seq").fetchall()
        samples = con.execute("SELECT run_id, metric, value FROM samples").fetchall()
        excl = con.execute("SELECT run_id, metric, reason FROM exclusions").fetchall()
    finally:
        con.close()
    out = []
    for rid, seq, variant, warmup, status, reason in runs:
        out.append(dict(seq=seq, variant=variant, warmup=bool(warmup), status=status, reason=reason,
                        metrics={m: v for r, m, v in samples if r == rid},
                        excluded={m: why for r, m, why in excl if r == rid}))
    return out


def unwrap(text: str) -> str:
    """Report text with wrapped lines joined, so a long reason can be searched whole."""
    return " ".join(line.strip() for line in text.splitlines())
