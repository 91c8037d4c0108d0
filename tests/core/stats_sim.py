"""Simulated experiments through ``compare()``: a Dataset built from drawn samples, no runner.

``compare(dataset, spec)`` is a pure function of the stored runs, so the
Monte-Carlo checks of issue 19 build the Dataset the store would load
(sides a and b, runs interleaved ABBA in time) and ask it the same way the
report does.  Values are drawn by the caller with a seeded generator.
"""

from __future__ import annotations

import numpy as np

from perfab.analyse.compare import compare
from perfab.specfile import parse_spec
from perfab.metrics import resolve
from perfab.store import Dataset
from perfab.store.dataset import RunInfo, Session


def spec_text(metrics: list[str], primary: tuple[str, ...] = (), fdr: str = "bh", margin_pct: float = 0.1) -> str:
    """A two-side spec (a, b) with one workload ``w`` declaring ``metrics`` (lower is better)."""
    head = (f'[experiment]\nname = "sim"\nruns = 20\nwarmup = 0\nfdr = "{fdr}"\nmargin = {margin_pct}\n\n'
            '[[variant]]\nname = "a"\n\n[[variant]]\nname = "b"\n\n'
            '[[workload]]\nname = "w"\nargv = ["w"]\nparser = "keyvalue"\n')
    decls = "".join(f'\n[[workload.metric]]\nname = "{m}"\ndirection = "lower"\n'
                    + ("primary = true\n" if m in primary else "") for m in metrics)
    return head + decls


class Simulator:
    """Builds Datasets for one spec and compares them."""

    def __init__(self, metrics: list[str], primary: tuple[str, ...] = (), exact: tuple[str, ...] = (),
                 fdr: str = "bh", margin_pct: float = 0.1):
        self.text = spec_text(metrics, primary, fdr, margin_pct)
        self.spec = parse_spec(self.text, "sim.toml")
        self.metrics = metrics
        self.meta = {("w", m): resolve(m, unit=None, higher_is_better=False, exact=m in exact, origin="parser")
                     for m in metrics}
        self.session = Session(1, "sim", 0.0, "finished", None, self.text, "sim.toml", "time", ((),), {})

    def analyse(self, samples: dict[str, tuple[np.ndarray, np.ndarray]], alpha: float = 0.05,
                confidence: float = 0.95):
        """``compare()`` of the samples: metric -> (baseline values, experiment values), each in run order."""
        n = max(len(s[0]) for s in samples.values())
        runs, values = [], {}
        for i in range(n):
            first, second = ("a", "b") if i % 2 == 0 else ("b", "a")  # ABBA blocks
            for j, side in enumerate((first, second)):
                rid = len(runs) + 1
                runs.append(RunInfo(rid, 1, rid, 1, "w", side, (), 0, False, i, float(rid), "ok", None, ()))
                pos = 0 if side == "a" else 1
                values[rid] = {m: float(s[pos][i]) for m, s in samples.items() if i < len(s[pos])}
        data = Dataset("sim", (self.session,), tuple(runs), values, {}, dict(self.meta))
        return compare(data, self.spec, alpha, confidence)

    def rows(self, samples, **kw) -> dict[str, object]:
        return {r.metric: r for r in self.analyse(samples, **kw).rows}


# The audit's noise models, shared by the tests and bench/verdict_rules.py.  Each draws n values in run order.

def ar1(rng, n: int, rho: float, cv: float = 0.01) -> np.ndarray:
    """Log-normal noise of CV ``cv`` following an AR(1) in run order with lag-1 correlation ``rho``."""
    e = rng.normal(0, cv * np.sqrt(1 - rho ** 2), n)
    x = np.empty(n)
    x[0] = rng.normal(0, cv)
    for t in range(1, n):
        x[t] = rho * x[t - 1] + e[t]
    return np.exp(x)


def ticks(rng, n: int, true_s: float, cv: float = 0.01, tick_s: float = 0.004, jitter: float = 0.005) -> np.ndarray:
    """CPU times as rusage reports them: whole scheduler ticks, rescaled by the precise runtime.

    The task runs ``true_s`` (log-normal, CV ``cv``); a tick of random phase
    lands in it ``floor(t / tick + U)`` times (unbiased), and the kernel's
    rescaling to the precise runtime multiplies the count by a factor near 1
    (``jitter``): 0.003966, 0.003936, 0.003982 for one 4 ms tick.
    """
    t = true_s * rng.lognormal(0, cv, n)
    count = np.floor(t / tick_s + rng.random(n))
    return np.round(count * tick_s * (1 + rng.normal(0, jitter, n)), 6)
