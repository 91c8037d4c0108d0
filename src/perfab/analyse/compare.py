"""Stage 5: compare every variant with the baseline, metric by metric.

For each workload and metric the measured (non-warm-up, successful) runs of
each side are pooled (a metric counted only in some counter groups is
analysed over the runs that carried it), compared by the metric's method,
and, after adjusting the p-values of all rows for multiple comparisons,
given a three-way verdict:

- ``**``   the interval lies entirely beyond the equivalence margin (so it
           excludes zero) and the adjusted p-value is at most alpha:
           a change beyond per-run noise;
- ``flat`` the interval lies inside +-margin: shown to be no change;
- ``ns``   neither: inconclusive at this n and noise.

Check metrics (``check = 0`` for failed requests) are not compared: they
are ``valid`` when every run met the expected value.
"""

from __future__ import annotations

import json
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from perfab.analyse.checks import adjust, bimodal, drift, too_few_runs
from perfab.analyse.methods import Estimate, get_method, min_detectable_effect, relative_cv
from perfab.errors import UsageError
from perfab.spec import Experiment, parse_spec
from perfab.store import Session, Store

PROFILE_PREFIX = "self."  # per-symbol profile shares, compared apart from the table

RUSAGE_LABELS = {
    "wall_s": "Time elapsed (s)",
    "user_s": "User (s)",
    "sys_s": "Sys (s)",
    "max_rss_kb": "Max RSS (KiB)",
    "vcsw": "Ctx switches vol",
    "ivcsw": "Ctx switches invol",
}


@dataclass(frozen=True)
class Row:
    """One metric of one workload, one variant against the baseline."""

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
    verdict: str  # ** | flat | ns | valid | INVALID | -
    n_base: int  # baseline runs used
    n_exp: int  # experiment runs used
    cv_base: float | None  # robust per-run noise of the baseline, fraction
    cv_exp: float | None  # same for the experiment side
    mde: float | None  # minimum detectable effect at this n and noise, fraction
    base_values: tuple[float, ...]  # the raw samples
    exp_values: tuple[float, ...]  # the raw samples
    warnings: tuple[str, ...] = ()  # diagnostics for this row

    @property
    def regressed(self) -> bool:
        """A real change in the bad direction."""
        if self.verdict != "**" or self.higher_is_better is None or self.estimate is None:
            return False
        return (self.estimate.delta < 0) == self.higher_is_better


@dataclass(frozen=True)
class WorkloadInfo:
    """What ran, for the report's headings."""

    name: str  # workload name
    command: str  # the command line as written in the spec
    failed: dict[str, list[str]]  # variant -> reasons of failed measured runs
    excluded: dict[str, int]  # "metric: reason" -> number of runs excluded


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
    warnings: tuple[str, ...] = ()  # experiment-level warnings
    notes: tuple[str, ...] = ()  # backend notes (e.g. what a simulated cache cannot tell)
    spec: Experiment | None = None  # the newest session's spec
    profiles: dict = field(default_factory=dict)  # (workload, variant) -> perfab.profile.ProfileRows


def analyse(store: Store, name: str | None = None, alpha: float | None = None, confidence: float | None = None,
            method: str | None = None) -> Analysis:
    """Compare the stored runs of experiment ``name`` (the newest by default)."""
    name = name or store.latest_experiment()
    sessions = store.sessions(name)
    spec = parse_spec(sessions[-1].spec_text, sessions[-1].spec_path or "<stored spec>")
    alpha = spec.alpha if alpha is None else alpha
    confidence = spec.confidence if confidence is None else confidence
    for label, value in (("--alpha", alpha), ("--confidence", confidence)):
        if not 0 < value < 1:
            raise UsageError(f"{label} {value}: must lie strictly between 0 and 1 (e.g. 0.05 and 0.95)")
    data = _Collected(store, name)
    rows = []
    for workload in spec.workloads:
        for metric in data.metrics(workload.name, spec, sessions[-1].backend):
            for variant in [v.name for v in spec.variants if v.name != spec.baseline]:
                rows.append(_row(spec, data, workload.name, metric, variant, confidence, alpha, method))
    rows = _verdicts(rows, alpha, spec.fdr)
    return Analysis(
        experiment=name, baseline=spec.baseline,
        variants=tuple(v.name for v in spec.variants if v.name != spec.baseline), rows=tuple(rows),
        workloads=tuple(data.workload_info(w) for w in spec.workloads), alpha=alpha, confidence=confidence,
        fdr=spec.fdr, runs_per_side=data.runs_per_side(), order=spec.order, backend=sessions[-1].backend,
        groups=sessions[-1].groups, environment=_side_env(sessions, spec.baseline),
        env_differences=_env_differences(sessions, spec), sessions=len(sessions),
        warnings=tuple(_experiment_warnings(sessions, spec, data)), notes=data.notes, spec=spec,
        profiles=_profiles(spec, data, alpha))


class _Collected:
    """The stored runs of one experiment, indexed for analysis."""

    def __init__(self, store: Store, name: str):
        self.runs = store.run_rows(name)
        self.meta = store.metric_meta(name)
        values: dict[int, dict[str, float]] = defaultdict(dict)
        for rid, metric, value in store.samples(name):
            values[rid][metric] = value
        self.excl: dict[int, dict[str, str]] = defaultdict(dict)
        for rid, metric, reason in store.exclusions(name):
            self.excl[rid][metric] = reason
        self.series: dict[tuple[str, str, str], list[tuple[int, float]]] = defaultdict(list)
        self.profile_runs: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
        self.order: dict[str, list[str]] = defaultdict(list)  # workload -> metrics in first-seen order
        notes: list[str] = []
        for r in self.runs:
            if r["warmup"] or r["status"] != "ok":
                continue
            shares = {m: v for m, v in values[r["run_id"]].items() if m.startswith(PROFILE_PREFIX)}
            if shares:
                self.profile_runs[(r["workload"], r["variant"])].append(shares)
            for metric, value in values[r["run_id"]].items():
                if metric in self.excl[r["run_id"]] or metric.startswith(PROFILE_PREFIX):
                    continue
                self.series[(r["workload"], r["variant"], metric)].append((r["seq"] + 100000 * r["session"], value))
                if metric not in self.order[r["workload"]]:
                    self.order[r["workload"]].append(metric)
            for note in _json_list(r["notes_json"]):
                if note not in notes:
                    notes.append(note)
        self.notes = tuple(notes)

    def metrics(self, workload: str, spec: Experiment, backend: str) -> list[str]:
        declared = [m.name for w in spec.workloads if w.name == workload for m in w.metrics]
        seen = self.order.get(workload, [])
        rest = [m for m in seen if m not in declared and m not in RUSAGE_LABELS]
        # Under valgrind, rusage times the simulator, not the workload: left out unless declared.
        rusage = [m for m in RUSAGE_LABELS if m in seen and m not in declared and backend != "cachegrind"]
        return declared + rest + rusage

    def values(self, workload: str, variant: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
        pairs = sorted(self.series.get((workload, variant, metric), []))
        return np.array([v for _, v in pairs], dtype=float), np.array([s for s, _ in pairs], dtype=float)

    def runs_per_side(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.runs:
            if not r["warmup"] and r["status"] == "ok":
                out[r["variant"]] += 1
        return dict(out)

    def workload_info(self, workload) -> WorkloadInfo:
        failed: dict[str, list[str]] = defaultdict(list)
        excluded: dict[str, int] = defaultdict(int)
        for r in self.runs:
            if r["workload"] != workload.name or r["warmup"]:
                continue
            if r["status"] == "failed":
                failed[r["variant"]].append(r["reason"] or "unknown")
            for metric, reason in self.excl[r["run_id"]].items():
                excluded[f"{metric}: {reason}"] += 1
        command = workload.argv[0] if workload.shell else " ".join(workload.argv)
        return WorkloadInfo(workload.name, command, dict(failed), dict(excluded))


def _row(spec: Experiment, data: _Collected, workload: str, metric: str, variant: str, confidence: float,
         alpha: float, method_override: str | None) -> Row:
    decl = next((m for w in spec.workloads if w.name == workload for m in w.metrics if m.name == metric), None)
    unit, hib, exact = data.meta.get((workload, metric), (None, None, False))
    if decl is not None:
        unit = decl.unit or unit
        hib = decl.higher_is_better if decl.higher_is_better is not None else hib
    label = (decl.label if decl and decl.label else None) or RUSAGE_LABELS.get(metric, metric)
    margin = (decl.margin_pct if decl and decl.margin_pct is not None else spec.margin_pct) / 100
    base, base_order = data.values(workload, spec.baseline, metric)
    exp, exp_order = data.values(workload, variant, metric)
    common = dict(workload=workload, metric=metric, label=label, variant=variant, unit=unit, higher_is_better=hib,
                  primary=bool(decl and decl.primary), margin=margin, n_base=len(base), n_exp=len(exp),
                  base_values=tuple(base), exp_values=tuple(exp))
    if decl is not None and decl.check is not None:
        bad = int(np.sum(base != decl.check) + np.sum(exp != decl.check))
        verdict = "valid" if bad == 0 and len(base) and len(exp) else f"INVALID ({bad} runs)"
        return Row(**common, estimate=None, q=None, verdict=verdict, cv_base=None, cv_exp=None, mde=None)
    if len(base) == 0 or len(exp) == 0:
        return Row(**common, estimate=None, q=None, verdict="-", cv_base=None, cv_exp=None, mde=None,
                   warnings=("no usable runs on one side",))
    name = method_override or (decl.method if decl and decl.method else None) or ("exact" if exact else spec.method)
    est = get_method(name).compare(base, exp, confidence)
    cv_b, cv_e = relative_cv(base), relative_cv(exp)
    noise = max([c for c in (cv_b, cv_e) if c is not None], default=None)
    warnings = list(est.warnings)
    if name != "exact":
        warnings += [w for w in (too_few_runs(len(base), len(exp), alpha),
                                 drift(base, base_order, spec.baseline), drift(exp, exp_order, variant),
                                 bimodal(base, spec.baseline), bimodal(exp, variant)) if w]
    mde = min_detectable_effect(len(base), len(exp), noise, alpha, margin=margin) if name != "exact" else None
    return Row(**common, estimate=est, q=None, verdict="", cv_base=cv_b, cv_exp=cv_e, mde=mde,
               warnings=tuple(warnings))


def _verdicts(rows: list[Row], alpha: float, fdr: str) -> list[Row]:
    tested = [i for i, r in enumerate(rows) if r.estimate is not None and r.estimate.p is not None]
    qs = adjust([rows[i].estimate.p for i in tested], fdr)
    q_of = dict(zip(tested, qs))
    out = []
    for i, r in enumerate(rows):
        if r.estimate is None:
            out.append(r)
            continue
        q = q_of.get(i)
        out.append(replace(r, q=q, verdict=verdict(r.estimate, r.margin, q, alpha)))
    return out


def verdict(est: Estimate, margin: float, q: float | None, alpha: float) -> str:
    """``**``, ``flat`` or ``ns`` for one estimate (see the module docstring)."""
    if est.delta is None or est.lo is None or est.hi is None:
        return "ns"
    if est.method == "exact":
        return "flat" if abs(est.delta) <= margin else "**"
    if -margin <= est.lo and est.hi <= margin:
        return "flat"
    if q is not None and q <= alpha and (est.lo > margin or est.hi < -margin):
        return "**"
    return "ns"


def _profiles(spec: Experiment, data: _Collected, alpha: float) -> dict:
    """Per-symbol self-time comparisons for workloads whose runs were profiled."""
    from perfab.profile import compare_profiles

    out = {}
    for w in spec.workloads:
        base = data.profile_runs.get((w.name, spec.baseline))
        for v in spec.variants:
            exp = data.profile_runs.get((w.name, v.name))
            if v.name != spec.baseline and base and exp:
                out[(w.name, v.name)] = compare_profiles(base, exp, alpha=alpha)
    return out


def _side_env(sessions: list[Session], side: str) -> dict[str, str]:
    for s in sessions:
        if s.side in (None, side):
            return s.environment
    return sessions[0].environment


def _env_differences(sessions: list[Session], spec: Experiment) -> tuple[tuple[str, str, str, str], ...]:
    """Differences between the baseline's environment and each variant's, when they ran in different sessions."""
    from perfab.machine import differences

    base = _side_env(sessions, spec.baseline)
    out = []
    for v in spec.variants:
        if v.name == spec.baseline:
            continue
        env = _side_env(sessions, v.name)
        if env is base:
            continue
        out += [(v.name, key, a, b) for key, a, b in differences(base, env)]
    return tuple(out)


def _experiment_warnings(sessions: list[Session], spec: Experiment, data: _Collected) -> list[str]:
    warnings = []
    if spec.variants[0].external:
        for v in spec.variants:
            n = sum(1 for s in sessions if s.side == v.name)
            if n == 1:
                warnings.append(f"one session (boot) of side {v.name!r}: sessions are a random effect and "
                                "between-boot variation is not estimated; run each side in >= 2 sessions")
    workloads = {json.dumps(tomllib.loads(s.spec_text).get("workload"), sort_keys=True) for s in sessions}
    if len(workloads) > 1:
        warnings.append("the workloads changed between sessions: runs of different commands are pooled")
    if spec.order == "sequential":
        warnings.append("sequential order: slow drift of the machine is confounded with the change")
    for info in (data.workload_info(w) for w in spec.workloads):
        for variant, reasons in info.failed.items():
            warnings.append(f"{info.name}: {len(reasons)} failed run(s) on {variant} (first: {reasons[0]})")
    return warnings


def _json_list(text: str | None) -> list[str]:
    return json.loads(text) if text else []
