"""The analysis as data: rows (one metric, one side against the baseline), workload facts, the whole.

``perfab.analyse.compare`` makes them; ``perfab.report.document`` builds the
report document every format renders from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfab.analyse.diagnostics import Diagnostic
from perfab.analyse.methods import Estimate
from perfab.analyse.summary import Summary
from perfab.analyse.units import Levels
from perfab.metrics import Metric
from perfab.analyse.verdicts import Verdict
from perfab.specfile import Experiment
from perfab.store import Params


@dataclass(frozen=True)
class Row:
    """One metric of one workload (at one sweep point), one variant against the baseline."""

    workload: str  # workload name
    metric: str  # metric name as stored
    label: str  # row label
    variant: str  # the experiment side
    unit: str | None  # unit of the values
    higher_is_better: bool | None  # direction; None: no good side
    primary: bool  # gates --fail-on-regression
    margin: float  # equivalence margin, as a fraction
    estimate: Estimate | None  # None for check rows and rows without samples
    q: float | None  # p-value adjusted across the report's rows
    verdict: Verdict  # ** | flat | ns | valid | INVALID | -
    n_base: int  # baseline runs used
    n_exp: int  # experiment runs used
    cv_base: float | None  # robust per-run noise of the baseline, fraction
    cv_exp: float | None  # same for the experiment side
    mde: float | None  # minimum detectable effect at this n and noise, fraction
    base_values: tuple[float, ...]  # the raw samples, in run order
    exp_values: tuple[float, ...]  # the raw samples, in run order
    warnings: tuple[Diagnostic, ...] = ()  # diagnostics for this row
    params: Params = ()  # the sweep point, () outside sweeps
    source: str = "backend"  # where the metric came from: rusage | backend | parser | service | machine
    base_order: tuple[int, ...] = ()  # position in time of each baseline sample (session, plan position)
    exp_order: tuple[int, ...] = ()  # same for the experiment side
    invalid_runs: int = 0  # a check row: runs that missed the expected value
    step: float = 0.0  # the metric's declared grid step, in its unit (``perfab.metrics.Metric.step``); 0: none
    levels: Levels | None = None  # judged on one mean per unit (a boot) and each level's variance; None: per run

    @property
    def regressed(self) -> bool:
        """A real change in the bad direction."""
        if self.verdict != Verdict.CHANGE or self.higher_is_better is None or self.estimate is None:
            return False
        change = self.estimate.delta if self.estimate.delta is not None else self.estimate.shift
        return change is not None and (change < 0) == self.higher_is_better


@dataclass(frozen=True)
class WorkloadInfo:
    """What ran, for the report's headings."""

    name: str  # workload name
    command: str  # the command line as written in the spec
    failed: dict[str, list[str]]  # variant -> reasons of failed measured runs
    excluded: dict[tuple[str, str], int]  # (metric, reason) -> number of runs excluded
    hidden: tuple[str, ...] = ()  # parser metrics without a direction, left out of the table
    simulated: tuple[str, ...] = ()  # the workload's own time and rate figures, meaningless under valgrind
    params: tuple[str, ...] = ()  # names of the sweep parameters, () outside sweeps


@dataclass(frozen=True)
class Analysis:
    """Everything a report needs."""

    experiment: str  # experiment name
    baseline: str  # baseline variant
    variants: tuple[str, ...]  # experiment variants, in spec order
    rows: tuple[Row, ...]  # all comparisons
    workloads: tuple[WorkloadInfo, ...]  # per workload facts
    alpha: float  # significance level applied to adjusted p-values
    confidence: float  # level of the intervals
    fdr: str  # bh | holm
    runs_per_side: dict[str, int]  # measured runs per variant (all workloads)
    order: str  # how runs were ordered
    backend: str  # how runs were measured
    groups: tuple[tuple[str, ...], ...]  # counter groups
    environment: dict[str, str]  # the baseline's environment snapshot
    env_differences: tuple[tuple[str, str, str, str], ...]  # (variant, key, baseline value, variant value)
    sessions: int  # sessions stored
    warnings: tuple[Diagnostic, ...] = ()  # experiment-level diagnostics
    notes: tuple[str, ...] = ()  # backend notes (e.g. what a simulated cache cannot tell)
    spec: Experiment | None = None  # the newest session's spec
    profiles: dict = field(default_factory=dict)  # (workload, variant) -> perfab.profile.ProfileRows
    sources: dict = field(default_factory=dict)  # variant -> {"commit": ..., "build": ...} of the newest session
    summaries: tuple[Summary, ...] = ()  # each side's median and interval per point (sweeps, single sides)
    metrics: dict[tuple[str, str], Metric] = field(default_factory=dict)  # (workload, metric) -> as judged
    decision: object = None  # runs = "auto": perfab.analyse.sequential.Decision at the newest look
    stop_reason: str | None = None  # runs = "auto": why the newest session stopped
    replication: dict | None = None  # the newest session's ``perfab.replication.Replication.to_json``; None: none
    unit_costs: tuple[float, float] | None = None  # host seconds a boot adds to its run, and a restored run takes


def compared(a: Analysis, workload: str) -> bool:
    """Whether ``workload`` has anything to show: a row with a verdict, or (one side) a point's values."""
    if not a.variants:
        return any(s.workload == workload for s in a.summaries)
    return any(r.workload == workload and r.verdict != Verdict.NONE for r in a.rows)
