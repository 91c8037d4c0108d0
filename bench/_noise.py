"""Record per-run noise on this machine with perfab itself: a real A/A experiment.

Both sides run the same binary, so every difference between them is noise.
The stored samples are the noise model of the calibration and power
benchmarks; the A/A report itself must show no ``**``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from perfab.analyse.compare import analyse  # noqa: E402
from perfab.analyse.methods import relative_cv  # noqa: E402
from perfab.machine import snapshot  # noqa: E402
from perfab.run.backends import TimeBackend  # noqa: E402
from perfab.run.executor import RealExecutor  # noqa: E402
from perfab.run.runner import Runner  # noqa: E402
from perfab.specfile import parse_spec  # noqa: E402
from perfab.store import Store  # noqa: E402

SPEC = """
[experiment]
name = "aa"
runs = {runs}
warmup = 2
seed = {seed}
pin = "1"               # the workload on CPU 1, perfab and the rest on CPU 0

[[variant]]
name = "A"
[[variant]]
name = "A2"

[[workload]]
name = "lockbench"
argv = ["{root}/build/outline/lockbench", "10000000"]
parser = "keyvalue"

[[workload.metric]]
name = "checksum"
method = "exact"

[[workload.metric]]
name = "ops/s"
direction = "higher"

[[workload]]
name = "syscalls"
argv = ["{root}/build/syscalls", "600000"]
parser = "keyvalue"

[[workload.metric]]
name = "syscalls/s"
direction = "higher"
"""


def record(db: Path, runs: int, seed: int = 1) -> Store:
    """Run the A/A experiment into ``db`` (skipped when it already holds it) and return the open store."""
    subprocess.run(["make", "-s", "-C", str(ROOT), "workloads"], check=True)
    store = Store(db)
    if "aa" not in store.experiments():
        exp = parse_spec(SPEC.format(runs=runs, seed=seed, root=ROOT), "aa.toml")
        Runner(exp, store, TimeBackend(), RealExecutor(), snapshot()).run()
    return store


def noise(store: Store) -> dict[tuple[str, str], np.ndarray]:
    """Pooled samples of both sides per (workload, metric), for the metrics analysed with a test."""
    a = analyse(store, "aa")
    out = {}
    for r in a.rows:
        values = np.array(r.base_values + r.exp_values)
        if r.estimate is not None and r.estimate.method == "nonparametric" and relative_cv(values):
            out[(r.workload, r.metric)] = values
    return out
