"""The analysis of one row at 100,000 runs per side fits in 1 GB of address space.

The row's whole analysis (the method's estimate and interval, the
sequential look, the warnings' checks, the planning figure and each side's
median interval) runs in a child process under ``RLIMIT_AS`` = 1 GB: with
the n*m pairwise differences built, one array alone would need 80 GB.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
import numpy as np
from perfab.analyse import checks, methods, rci, summary
n = 100_000
rng = np.random.default_rng(7)
kind = sys.argv[1]
if kind == "continuous":
    base, exp = rng.lognormal(0, 0.1, n), rng.lognormal(0.01, 0.1, n)
else:  # whole counts: a grid, the rounding triangles' path
    base, exp = np.round(rng.normal(1000, 30, n)), np.round(rng.normal(1003, 30, n))
order = np.arange(n)
for name in ("nonparametric", "exact", "normal"):
    est = methods.get_method(name).compare(base, exp, 0.95)
    assert est.lo <= est.delta <= est.hi, (name, est)
look = rci.look(base, exp, 0.01, 0.05, 0.5)
warnings = [checks.drift(base, order, "base"), checks.bimodal(base, "base"), checks.bimodal(exp, "exp"),
            checks.too_few_runs(n, n, 0.05)]
cv = methods.relative_cv(base)
mde = methods.min_detectable_effect(n, n, cv, 0.05)
med = summary.median_interval(base, 0.95)
est = methods.AssumeNothing().compare(base, exp, 0.95)
print(f"{est.delta:.6f} {est.lo:.6f} {est.hi:.6f} {look.pi:.3g} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
"""


@pytest.mark.parametrize("kind", ["continuous", "counts"])
def test_one_row_of_100k_runs_per_side_within_1_gb(kind):
    env = dict(os.environ, PYTHONPATH=str(SRC), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, kind], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    delta, lo, hi, _, maxrss_kb = out.stdout.split()
    assert 0.005 < float(delta) < 0.015 if kind == "continuous" else 0.001 < float(delta) < 0.005
    assert float(lo) < float(delta) < float(hi)
    assert int(maxrss_kb) < 1 << 20
