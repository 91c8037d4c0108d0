"""Stage 5: compare every variant with the baseline, metric by metric.

``compare(dataset, spec)`` is a pure function of the stored runs
(``perfab.store.Dataset``) and the spec: the runner, a second store and
sequential stopping all ask it the same way.  For each workload, sweep
point and metric the measured (non-warm-up, successful) runs of each side
are pooled (a metric counted only in some counter groups is analysed over
the runs that carried it), compared by the metric's method, and, after
adjusting the p-values of all rows for multiple comparisons, given a
three-way verdict (``verdict``):

- ``**``   the interval lies entirely beyond the equivalence margin (so it
           excludes zero) and the adjusted p-value is at most alpha:
           a change beyond per-run noise;
- ``flat`` the interval lies inside +-margin, and the data's grid
           (``perfab.analyse.grid``: the metric's declared clock or the step
           its values show) is finer than the margin: shown to be no change;
- ``ns``   neither: inconclusive at this n and noise.

Which method judges a row (the exact method only for deterministic
counts), the lag-1 check in run order with its widening, the p-value a
grid row's interval implies, and the rules below are in
``perfab.analyse.verdicts``; primary rows carry 80% of alpha in the
adjustment across rows when only some rows are primary.

When the baseline's median is 0 there is no relative change: ``**`` then
needs the interval of the absolute shift to exclude 0, and nothing is
``flat``.  Samples that are not finite never reach a method: the row is
refused with the reason.  A run whose reading of a metric was unusable
(not a finite number, missing from the output; ``perfab.run.readings``)
is left out of that metric's row, and the row says how many runs it used
and why.  Check metrics (``check = 0`` for failed
requests) are not compared: they are ``valid`` when every run met the
expected value.  Metrics a parser reports without a direction and that the
spec does not declare are left out of the table unless asked for
(``show_all``).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import replace

import numpy as np

from perfab.analyse import serial
from perfab.analyse.checks import bimodal, drift, lag1_autocorrelation, no_spread, too_few_runs, trend
from perfab.analyse.diagnostics import Diagnostic, Kind, diagnostics
from perfab.analyse.grid import flat_resolution, resolution
from perfab.analyse.model import Analysis, Row, WorkloadInfo  # noqa: F401 (re-exported)
from perfab.analyse.method_exact import exact_spread
from perfab.analyse.methodbase import Refusal
from perfab.analyse.methods import ABSOLUTE, Estimate, get_method, relative_cv
from perfab.analyse.multiplicity import adjust, holm_weights
from perfab.analyse.profiles import compare_profiles
from perfab.analyse.pooling import pooled_warnings
from perfab.analyse.sampleview import SampleView
from perfab.analyse.summary import Summary, summarize
from perfab.analyse.units import UNIT_STRIDE, Levels, components, grouped, unit_means
from perfab.analyse.verdicts import (Verdict, basis_note, choose, grid_pair, method_for,  # noqa: F401
                                     serial_widening, verdict)  # (re-exported)
from perfab.errors import UsageError
from perfab.methodtraits import counts_method
from perfab.metrics import RUSAGE, Metric, resolve
from perfab.replication import RUN, run_cost, stored
from perfab.specfile.backends import DEFAULT, declared
from perfab.specfile import ALIGNED_SUFFIX, Experiment, MetricSpec, parse_spec
from perfab.specfile.stored import definitions
from perfab.store import Dataset, Params, Session, Store
from perfab.store.columns import groups
from perfab.units import fmt_pct


def analyse(store: Store, name: str | None = None, alpha: float | None = None, confidence: float | None = None,
            method: str | None = None, show_all: bool = False) -> Analysis:
    """Compare the stored runs of experiment ``name`` (the newest by default)."""
    data = store.load(name or store.latest_experiment())
    if not data.sessions:  # its sessions deleted by hand
        raise UsageError(f"{store.path}: experiment {data.experiment!r} holds no session; run it first "
                         "(perfab run SPEC)")
    last = data.sessions[-1]
    spec = parse_spec(last.spec_text, last.spec_path or "<stored spec>")
    analysis = compare(data, spec, alpha, confidence, method, show_all)
    if spec.layout_check:  # the aligned pair's verdicts mark the rows whose `**` depends on the layout
        from perfab.analyse.layoutcheck import attach
        name = data.experiment + ALIGNED_SUFFIX
        aligned = analyse(store, name, alpha, confidence, method, show_all) if name in store.experiments() else None
        analysis = attach(analysis, aligned, name)
    return analysis


def compare(data: Dataset, spec: Experiment, alpha: float | None = None, confidence: float | None = None,
            method: str | None = None, show_all: bool = False) -> Analysis:
    """The analysis of ``data`` under ``spec``: a pure function (see the module docstring)."""
    alpha = spec.alpha if alpha is None else alpha
    confidence = spec.confidence if confidence is None else confidence
    for label, value in (("--alpha", alpha), ("--confidence", confidence)):
        if not (0 < value < 1):
            raise UsageError(f"{label} {value}: must lie strictly between 0 and 1 (e.g. 0.05 and 0.95)")
    idx = _Index(data)
    backend = _backend(data)  # the class; the Analysis keeps its name
    rows, infos, summaries, metrics = [], [], [], {}
    for workload in spec.workloads:
        shown, hidden, simulated = _metrics(idx, workload, backend, show_all)
        metrics.update({(workload.name, m): judged(spec, data, workload.name, m) for m in shown})
        for point in _in_grid_order(idx.points(workload.name), workload):
            for metric in shown:
                for variant in [v.name for v in spec.variants if v.name != spec.baseline]:
                    rows.append(_row(spec, idx, workload.name, point, metric, variant, confidence, alpha, method))
                if workload.params or len(spec.variants) == 1:
                    summaries += _summaries(spec, idx, workload.name, point, metric, confidence)
        infos.append(idx.workload_info(workload, tuple(hidden), tuple(simulated)))
    decision = None
    if spec.sequential is not None:
        rows, decision = _sequential_verdicts(rows, spec, alpha, confidence)
    else:
        rows = _verdicts(rows, alpha, spec.fdr)
    sessions = list(data.sessions)
    placement = _one_placement(rows, sessions, backend)
    return Analysis(
        experiment=data.experiment, baseline=spec.baseline,
        variants=tuple(v.name for v in spec.variants if v.name != spec.baseline), rows=tuple(rows),
        workloads=tuple(infos), alpha=alpha, confidence=confidence, fdr=spec.fdr,
        runs_per_side=idx.runs_per_side(), order=spec.order, backend=backend.name,
        groups=sessions[-1].groups if sessions else ((),), environment=_side_env(sessions, spec.baseline),
        env_differences=_env_differences(sessions, spec), sessions=len(sessions),
        warnings=tuple(_experiment_warnings(sessions, spec, idx)) + placement, notes=idx.notes, spec=spec,
        profiles=_profiles(spec, idx, alpha), sources=sessions[-1].sources if sessions else {},
        summaries=tuple(summaries), metrics=metrics, decision=decision,
        stop_reason=next((x.stop_reason for x in reversed(sessions) if x.stop_reason), None),
        replication=_replication(sessions), unit_costs=_unit_costs(data))


class _Index:
    """The measured runs of a dataset, indexed by (workload, point, variant, metric), read from its columns."""

    def __init__(self, data: Dataset):
        self.data = data
        self.meta: dict[tuple[str, str], Metric] = data.meta
        t = data.table
        self.measured = t.measured()
        self.series: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # -> (run-order keys, values) in run order
        self.unit_of: dict[tuple, np.ndarray] = {}  # -> each run's unit of replication (``unit_labels``), same order
        self.unit_name, self.units = unit_labels(data)  # "boot" or "run"; one label per table row
        self.order: dict[str, list[str]] = {}  # workload -> metrics in first-seen order
        first: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
        order = t.order
        for rank, (metric, s) in enumerate(data.samples.items()):
            keep = self.measured[s.rows] & ~data.excluded_mask(s.rows, metric)
            rows, values = s.rows[keep], s.values[keep]
            for group in groups(t.side_key(rows)):
                r = int(rows[group[0]])
                by_time = group[np.argsort(order[rows[group]], kind="stable")]
                key = (t.workload[r], t.params[r], t.variant[r], metric)
                self.series[key] = (order[rows[by_time]], values[by_time])
                self.unit_of[key] = self.units[rows[by_time]]
            for code in np.unique(t.workload.codes[rows]):
                at = int(np.flatnonzero(t.workload.codes[rows] == code)[0])
                first[t.workload.levels[code]].append((int(rows[at]), rank, metric))
        self.order = {w: [m for _, _, m in sorted(seen)] for w, seen in first.items()}
        self._points = _first_seen(t, self.measured)
        self.dropped: dict[tuple, list[str]] = defaultdict(list)  # (workload, point, variant, metric) -> reasons
        for r in _rows_of(t, data.excluded, self.measured):
            for metric, reason in data.excluded[int(t.run_id[r])].items():
                self.dropped[(t.workload[r], t.params[r], t.variant[r], metric)].append(reason)
        self.profile_runs: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
        self.profile_units: dict[tuple[str, str], list[int]] = defaultdict(list)  # each profiled run's unit
        for r in _rows_of(t, data.profiles, self.measured):
            self.profile_runs[(t.workload[r], t.variant[r])].append(data.profiles[int(t.run_id[r])])
            self.profile_units[(t.workload[r], t.variant[r])].append(int(self.units[r]))
        self.notes = _alike(n for code in _distinct(t.notes.codes[self.measured]) for n in t.notes.levels[code])

    def points(self, workload: str) -> list[Params]:
        return self._points.get(workload) or [()]

    def values(self, workload: str, point: Params, variant: str, metric: str) -> tuple[np.ndarray, SampleView]:
        """(the values, the position in time of each) of one side's runs, in run order."""
        order, values = self.series.get((workload, point, variant, metric), (np.zeros(0, np.int64), np.zeros(0)))
        return values, SampleView(order)

    def unit_values(self, workload: str, point: Params, variant: str, metric: str) -> np.ndarray:
        """The unit of replication of each of one side's runs, in run order (``values``)."""
        return self.unit_of.get((workload, point, variant, metric), np.zeros(0, np.int64))

    def used(self, workload: str, point: Params, variant: str, metric: str, used: int) -> tuple[Diagnostic, ...]:
        """A side's runs whose reading of ``metric`` was unusable, when some were: how many the row used, and why."""
        reasons = self.dropped.get((workload, point, variant, metric))
        if not reasons:
            return ()
        first = max(set(reasons), key=reasons.count)
        text = (f"{variant}: used {used} of {used + len(reasons)} runs; {len(reasons)} run(s) had no usable reading "
                f"({first}{'' if len(set(reasons)) == 1 else '; and other reasons'})")
        return (Diagnostic(Kind.RUNS_USED, text, {"side": variant, "used": used, "dropped": len(reasons),
                                                  "reason": first}),)

    def runs_per_side(self) -> dict[str, int]:
        t = self.data.table
        codes = t.variant.codes[self.measured]
        return {t.variant.levels[c]: int(np.sum(codes == c)) for c in _distinct(codes)}

    def workload_info(self, workload, hidden: tuple[str, ...], simulated: tuple[str, ...] = ()) -> WorkloadInfo:
        t = self.data.table
        mine = (t.workload.codes == t.workload.code(workload.name)) & ~t.warmup
        failed: dict[str, list[str]] = defaultdict(list)
        for r in np.flatnonzero(mine & (t.status.codes == t.status.code("failed"))):
            failed[t.variant[r]].append(t.reason[r] or "unknown")
        excluded: dict[tuple[str, str], int] = defaultdict(int)
        for r in _rows_of(t, self.data.excluded, mine):
            for metric, reason in self.data.excluded[int(t.run_id[r])].items():
                excluded[(metric, reason)] += 1
        command = workload.argv[0] if workload.shell else " ".join(workload.argv)
        return WorkloadInfo(workload.name, command, dict(failed), dict(excluded), hidden=hidden,
                            simulated=simulated, params=tuple(n for n, _ in workload.params))


def _replication(sessions: list[Session]) -> dict | None:
    """The newest session's replication, where it says more than "each run its own draw, nothing perturbed"."""
    replication = stored(sessions[-1].design) if sessions else None
    if replication is None or (replication.unit == RUN and not replication.perturbed):
        return None
    return replication.to_json()


def _unit_costs(data: Dataset) -> tuple[float, float] | None:
    """(host seconds a boot adds to the run that makes it, host seconds of a restored run), from the notes that
    say how each guest run began and how long it took; None without both kinds of run."""
    costs = [run_cost(text) for text in data.table.notes.levels]
    saved = [c[1] for c in costs if c is not None and c[0] == "saved"]
    restored = [c[1] for c in costs if c is not None and c[0] == "restored"]
    if not saved or not restored:
        return None
    run = float(np.median(restored))
    return max(0.0, float(np.median(saved)) - run), run


def unit_labels(data: Dataset) -> tuple[str, np.ndarray]:
    """What the runs' units of replication are ("boot" or "build" when some session's runs shared them, else "run")
    and one label per table row: a session's boot or layout build (``perfab.replication``), or for a run that is
    its own draw a label of its own (a session stored before perfab recorded its replication is one of those)."""
    t = data.table
    labels = -(t.run_id + 1)  # every run its own unit
    name = RUN
    for session in data.sessions:
        replication = stored(session.design)
        if replication.unit == RUN:
            continue
        name = replication.unit
        mine = t.session == session.id
        labels[mine] = session.id * UNIT_STRIDE + np.where(t.rep[mine] >= 0, t.rep[mine] % replication.units, 0)
    return name, labels


_VARYING = re.compile(r"\b[0-9a-f]{12}\b|\d+(?:\.\d+)?")  # a saved guest's key, a time, a count


def _alike(notes) -> tuple[str, ...]:
    """The runs' notes, each once: notes that differ only in their numbers and keys (each guest run's "restored from
    ... 3f2a91c0d4e1 and powered off in 1.9 s") as the first of them and how many more there were."""
    first: dict[str, str] = {}
    more: dict[str, int] = defaultdict(int)
    seen: set[str] = set()
    for note in notes:
        if note in seen:
            continue
        seen.add(note)
        shape = _VARYING.sub("#", note)
        if shape in first:
            more[shape] += 1
        else:
            first[shape] = note
    return tuple(note if not more[shape] else f"{note} (and {more[shape]} more like it)"
                 for shape, note in first.items())


def _rows_of(t, by_run: dict, mask: np.ndarray) -> np.ndarray:
    """Rows within ``mask`` whose run id ``by_run`` holds, in run order."""
    if not by_run:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(mask & np.isin(t.run_id, np.fromiter(by_run, dtype=np.int64)))


def _distinct(codes: np.ndarray) -> list[int]:
    """The distinct codes in first-seen order."""
    values, first = np.unique(codes, return_index=True)
    return [int(values[i]) for i in np.argsort(first)]


def _first_seen(t, measured: np.ndarray) -> dict[str, list[Params]]:
    """workload -> its sweep points in first-seen order over the measured runs."""
    rows = np.flatnonzero(measured)
    pairs = t.workload.codes[rows].astype(np.int64) * (len(t.params.levels) or 1) + t.params.codes[rows]
    out: dict[str, list[Params]] = defaultdict(list)
    for code in _distinct(pairs):
        r = int(rows[np.flatnonzero(pairs == code)[0]])
        out[t.workload[r]].append(t.params[r])
    return dict(out)


def _in_grid_order(points: list[Params], workload) -> list[Params]:
    """Sweep points in the spec's order (stored points outside today's grid last, as first seen)."""
    from perfab.plan import sweep_points

    grid = {p: i for i, p in enumerate(sweep_points(workload))}
    return sorted(points, key=lambda p: grid.get(p, len(grid)))


def _backend(data: Dataset):
    """The class of the backend that measured the latest session (the default backend's with none)."""
    return declared(data.sessions[-1].backend if data.sessions else DEFAULT)


def _metrics(idx: _Index, workload, backend, show_all: bool) -> tuple[list[str], list[str], list[str]]:
    """(metrics in the table, parser metrics left out for want of a direction, time figures under valgrind)."""
    declared = [m.name for m in workload.metrics]
    seen = idx.order.get(workload.name, [])
    rest, hidden, simulated = [], [], []
    for m in seen:
        if m in declared or m in RUSAGE:
            continue
        meta = idx.meta.get((workload.name, m))
        if meta is not None and meta.origin == "parser" and not show_all:
            if backend.slows_workload and meta.kind in ("time", "rate"):
                simulated.append(m)
                continue
            if meta.higher_is_better is None:
                hidden.append(m)
                continue
        rest.append(m)
    # Under a simulator (valgrind), rusage times the simulator, not the workload: left out unless declared.
    rusage = [m for m in RUSAGE if m in seen and m not in declared and not backend.simulated]
    return declared + rest + rusage, hidden, simulated


def _declared(spec: Experiment, workload: str, metric: str) -> MetricSpec | None:
    return next((m for m in spec.workload(workload).metrics if m.name == metric), None)


def judged(spec: Experiment, data: Dataset, workload: str, metric: str) -> Metric:
    """The metric as the analysis judges it: as its producer reported it (nothing when nothing was stored),
    then as the spec declares it (``perfab.metrics.resolve``)."""
    known = data.meta.get((workload, metric)) or resolve(metric, unit=None, higher_is_better=None, exact=False,
                                                         origin="backend")
    decl = next((m for w in spec.workloads if w.name == workload for m in w.metrics if m.name == metric), None)
    return resolve(metric, known=known, declared=decl)


def _row(spec: Experiment, idx: _Index, workload: str, point: Params, metric: str, variant: str,
         confidence: float, alpha: float, method_override: str | None) -> Row:
    decl = _declared(spec, workload, metric)
    meta = judged(spec, idx.data, workload, metric)
    margin = (decl.margin_pct if decl and decl.margin_pct is not None else spec.margin_pct) / 100
    base, base_order = idx.values(workload, point, spec.baseline, metric)
    exp, exp_order = idx.values(workload, point, variant, metric)
    common = dict(workload=workload, metric=metric, label=meta.label, variant=variant, unit=meta.unit,
                  higher_is_better=meta.higher_is_better,
                  primary=bool(decl and decl.primary), margin=margin, n_base=len(base), n_exp=len(exp),
                  base_values=SampleView(base), exp_values=SampleView(exp), params=point, source=meta.origin,
                  base_order=base_order, exp_order=exp_order, step=meta.step)
    used = (idx.used(workload, point, spec.baseline, metric, len(base))
            + idx.used(workload, point, variant, metric, len(exp)))
    none = dict(estimate=None, q=None, cv_base=None, cv_exp=None, mde=None)
    if decl is not None and decl.check is not None:
        bad = int(np.sum(base != decl.check) + np.sum(exp != decl.check))
        if bad == 0 and len(base) and len(exp):
            return Row(**common, **none, verdict=Verdict.VALID)
        return Row(**common, **none, verdict=Verdict.INVALID, invalid_runs=bad)
    if len(base) == 0 or len(exp) == 0:
        return Row(**common, **none, verdict=Verdict.NONE,
                   warnings=(Diagnostic(Kind.NO_SAMPLES, "no usable runs on one side",
                                        {"n_base": len(base), "n_exp": len(exp)}),) + used)
    bad = int(np.sum(~np.isfinite(base)) + np.sum(~np.isfinite(exp)))
    if bad:
        return Row(**common, **none, verdict=Verdict.NONE, warnings=(
            Diagnostic(Kind.NON_FINITE, f"{bad} non-finite sample(s) (inf or nan): refused", {"samples": bad}),))
    (base, base_order), (exp, exp_order), levels = _at_units(idx, (workload, point, spec.baseline, metric),
                                                             (workload, point, variant, metric))
    common.update(levels=levels)
    asked = method_override or (decl.method if decl and decl.method else None) or \
        (counts_method() if meta.exact else spec.method)
    method, refusal = _choose(asked, base, exp, levels, meta.exact)
    if levels is not None and refusal is not None and not (method_override or (decl and decl.method)):
        refusal = None  # counts that vary between boots are what boots are for: the rank test, and nothing to say
    est = method.compare(base, exp, confidence, step=resolution(base, exp, declared=meta.step, margin=margin))
    cv_b, cv_e = relative_cv(base), relative_cv(exp)
    noise = max([c for c in (cv_b, cv_e) if c is not None], default=None)
    warnings = used + (diagnostics(Kind.METHOD_FALLBACK, refusal and refusal.text, asked=asked, used=method.name,
                                   **(refusal.data if refusal else {}))
                       + diagnostics(Kind.METHOD, *est.warnings, method=est.method)
                       + diagnostics(Kind.BASIS, *basis_note(est, base, exp), basis=est.basis))
    if not method.traits.counted:
        warnings += _noise_checks(spec, meta, metric, variant, (base, base_order), (exp, exp_order), alpha,
                                  levels.unit if levels else RUN)
    if method.traits.grid_pair:
        est = grid_pair(est, base, exp)
    if method.traits.serial:
        est, serial = _serial(est, method, base, exp, confidence)
        warnings += serial
    est = replace(est, resolution=flat_resolution(est.resolution, meta.step, est.median_base))  # the widened too
    mde = method.mde(len(base), len(exp), noise, alpha, margin)
    return Row(**common, estimate=est, q=None, verdict=Verdict.PENDING, cv_base=cv_b, cv_exp=cv_e, mde=mde,
               warnings=warnings)


def _at_units(idx: _Index, base_key: tuple, exp_key: tuple):
    """Each side's (values, run order) as the row is judged: one mean per unit of replication where runs share a
    unit (``perfab.analyse.units``), else the runs; and the row's ``Levels`` (None when every run is a unit)."""
    (base, base_order), (exp, exp_order) = idx.values(*base_key), idx.values(*exp_key)
    base_units, exp_units = idx.unit_values(*base_key), idx.unit_values(*exp_key)
    if not (grouped(base_units) or grouped(exp_units)):
        return (base, base_order), (exp, exp_order), None
    mb, ob, nb = unit_means(base, base_units, np.asarray(base_order))
    me, oe, ne = unit_means(exp, exp_units, np.asarray(exp_order))
    between, within = components([(base, base_units), (exp, exp_units)], float(np.mean(base)))
    levels = Levels(idx.unit_name, len(mb), len(me), float((nb.sum() + ne.sum()) / (len(nb) + len(ne))),
                    between, within)
    return (mb, SampleView(ob)), (me, SampleView(oe)), levels


def _choose(asked: str, base: np.ndarray, exp: np.ndarray, levels: Levels | None, counts: bool = False):
    """``verdicts.choose``, and at the level of units a counted method exactly where every unit of a side read the
    same value: counts that repeat within a boot but not across boots are one draw each, judged by rank; counts
    (``counts``: declared so, or whole numbers) that every independent boot repeats are deterministic, whatever
    the row asked for (a rank test of constant sides can only say ``ns``).  A constant reading that is not a count
    (a time printed to a few digits) may be a rounding, and stays with the row's method."""
    constant = levels is not None and min(len(base), len(exp)) >= 2 and np.ptp(base) == 0 and np.ptp(exp) == 0
    if constant and (counts or (np.all(base == np.round(base)) and np.all(exp == np.round(exp)))):
        return get_method(counts_method()), None
    method, refusal = choose(asked, base, exp)
    if levels is None or not method.traits.counted:
        return method, refusal
    spread = exact_spread(base, exp)
    return get_method(method.traits.fallback), Refusal(
        f"counts differ between {levels.unit}s (by {fmt_pct(spread)} of the median): each {levels.unit} is one "
        f"draw, judged by the rank test ({method.traits.fallback}) over the {levels.unit}s, not as deterministic "
        "counts", {"spread": spread})


def _noise_checks(spec: Experiment, meta: Metric, metric: str, variant: str, base_side, exp_side,
                  alpha: float, unit: str = RUN) -> tuple[Diagnostic, ...]:
    """What per-run noise may hide from a test: too few runs (or boots), drift, two modes, no spread (``checks``).

    ``base_side`` and ``exp_side`` are each (values, run order), one value per ``unit``.
    """
    (base, base_order), (exp, exp_order) = base_side, exp_side
    return (diagnostics(Kind.TOO_FEW_RUNS, too_few_runs(len(base), len(exp), alpha, unit), n_base=len(base),
                        n_exp=len(exp), alpha=alpha)
            + _drift(base, base_order, spec.baseline) + _drift(exp, exp_order, variant)
            + diagnostics(Kind.BIMODAL, bimodal(base, spec.baseline), side=spec.baseline)
            + diagnostics(Kind.BIMODAL, bimodal(exp, variant), side=variant)
            + diagnostics(Kind.NO_SPREAD, no_spread(base, exp, metric) if meta.origin == "parser" else None,
                          metric=metric))


def _drift(values: np.ndarray, order: tuple[int, ...], side: str) -> tuple[Diagnostic, ...]:
    """``checks.drift`` of one side, naming the side in its data (the HTML marks that side's run-order plot)."""
    text = drift(values, np.array(order), side)
    if not text:
        return ()
    rho, p = trend(values, np.array(order))
    return (Diagnostic(Kind.DRIFT, text, {"side": side, "rho": rho, "p": p}),)


def _serial(est: Estimate, method, base: np.ndarray, exp: np.ndarray,
            confidence: float) -> tuple[Estimate, tuple[Diagnostic, ...]]:
    """``verdicts.serial_widening`` of a row, its note with the autocorrelation behind it as data."""
    wide, notes = serial_widening(est, method, base, exp, confidence)
    if not notes:
        return wide, ()
    found = serial.estimate(base, exp)
    r1, z = (found.rho_hat, found.z) if found is not None else lag1_autocorrelation([base, exp])
    return wide, diagnostics(Kind.SERIAL, *notes, autocorrelation=float(r1), z=float(z),
                             widened=wide is not est)


def _summaries(spec: Experiment, idx: _Index, workload: str, point: Params, metric: str,
               confidence: float) -> list[Summary]:
    unit = judged(spec, idx.data, workload, metric).unit
    out = []
    for v in spec.variants:
        values, order = idx.values(workload, point, v.name, metric)
        units = idx.unit_values(workload, point, v.name, metric)
        if grouped(units):  # one value per unit of replication, as the rows are judged
            values = unit_means(values, units, np.asarray(order))[0]
        if (s := summarize(workload, point, v.name, metric, unit, values, confidence)) is not None:
            out.append(s)
    return out


def design_of(spec: Experiment, alpha: float, confidence: float):
    """The group-sequential design of a ``runs = "auto"`` spec (``perfab.analyse.sequential.Design``)."""
    from perfab.analyse.sequential import Design
    from perfab.plan import runs_per_block

    seq = spec.sequential
    return Design(min_runs=seq.min_runs, max_runs=seq.max_runs, block=runs_per_block(spec), alpha=alpha,
                  confidence=confidence, spending=seq.spending, stop_on=seq.stop_on)


def _sequential_verdicts(rows: list[Row], spec: Experiment, alpha: float, confidence: float):
    """Verdicts of a sequential experiment: the design's decision at the newest look (not BH on fixed-n p)."""
    from perfab.analyse.sequential import decide, from_rows

    decision = decide(from_rows(rows), design_of(spec, alpha, confidence))
    by_key = {d.key: d for d in decision.rows}
    out = []
    for r in rows:
        d = by_key.get((r.workload, r.params, r.metric, r.variant))
        if d is None:
            out.append(r)
            continue
        decided = d.state in (Verdict.CHANGE, Verdict.FLAT)
        verdict_ = Verdict(d.state) if decided else Verdict.NS
        warnings = r.warnings + diagnostics(Kind.SEQUENTIAL, *d.warnings, *(() if decided else (d.reason,)),
                                            state=d.state, decided_at=d.decided_at)
        out.append(replace(r, estimate=d.estimate or r.estimate, q=d.q, verdict=verdict_,
                           mde=d.mde if d.mde is not None else r.mde, warnings=warnings))
    return out, decision


PRIMARY_SHARE = 0.8  # share of alpha the primary rows carry when only some rows are primary (as in sequential)


def _verdicts(rows: list[Row], alpha: float, fdr: str) -> list[Row]:
    """Adjust the p-values across rows and give each row its verdict.

    When some rows, not all, are primary (declared before the experiment),
    they carry ``PRIMARY_SHARE`` of alpha between them and the other rows
    the rest: weighted Benjamini-Hochberg or weighted Holm
    (``multiplicity.adjust``), the same split the sequential design gives its
    primary rows.  Without it a primary row among ten lost a third of its
    power to the rows nobody gates on.
    """
    tested = [i for i, r in enumerate(rows) if r.estimate is not None and r.estimate.p is not None]
    weights = holm_weights([rows[i].primary for i in tested], PRIMARY_SHARE)
    qs = adjust([rows[i].estimate.p for i in tested], fdr, weights)
    q_of = dict(zip(tested, qs))
    out = []
    for i, r in enumerate(rows):
        if r.estimate is None:
            out.append(r)
            continue
        q = q_of.get(i)
        v = verdict(r.estimate, r.margin, q, alpha)
        out.append(replace(r, q=q, verdict=v, warnings=r.warnings + _resolution_warning(r.estimate, r.margin, v)))
    return out


def _resolution_warning(est: Estimate, margin: float, verdict_: Verdict) -> tuple[Diagnostic, ...]:
    """Why a row on coarse data is ``ns``, when its grid is what stops a verdict."""
    if verdict_ != Verdict.NS or est.basis == ABSOLUTE or est.resolution <= margin:
        return ()
    text = (f"values sit on a grid of {_pct(est.resolution)} of the baseline (a coarse clock or whole counts), "
            f"coarser than the +-{_pct(margin)} margin: flat cannot be shown")
    if est.coarse:
        text += "; with less spread than one step, the interval covers any shift rounding could hide"
    return (Diagnostic(Kind.RESOLUTION, text, {"resolution": est.resolution, "margin": margin,
                                               "coarse": bool(est.coarse)}),)


def _pct(x: float) -> str:

    return fmt_pct(x)


def _profiles(spec: Experiment, idx: _Index, alpha: float) -> dict:
    """Per-symbol self-time comparisons for workloads whose runs were profiled."""
    out = {}
    for w in spec.workloads:
        base = _profile_units(idx, (w.name, spec.baseline))
        for v in spec.variants:
            exp = _profile_units(idx, (w.name, v.name))
            if v.name != spec.baseline and base and exp:
                out[(w.name, v.name)] = compare_profiles(base, exp, alpha=alpha)
    return out


def _profile_units(idx: _Index, key: tuple[str, str]) -> list[dict[str, float]]:
    """One side's profiles as the comparison takes them: one per unit of replication (the mean share of each
    symbol over the unit's runs, 0 where a run did not list it), or one per run when every run is a unit."""
    runs, units = idx.profile_runs.get(key) or [], idx.profile_units.get(key) or []
    if not grouped(np.array(units)):
        return runs
    by_unit: dict[int, list[dict[str, float]]] = defaultdict(list)
    for unit, shares in zip(units, runs):
        by_unit[unit].append(shares)
    out = []
    for members in by_unit.values():
        symbols = {k for m in members for k in m}
        out.append({k: sum(m.get(k, 0.0) for m in members) / len(members) for k in sorted(symbols)})
    return out


def _side_env(sessions: list[Session], side: str) -> dict[str, str]:
    for s in sessions:
        if s.side in (None, side):
            return s.environment
    return sessions[0].environment if sessions else {}


def _env_differences(sessions: list[Session], spec: Experiment) -> tuple[tuple[str, str, str, str], ...]:
    """Differences between the baseline's environment and each variant's, when they ran in different sessions."""
    from perfab.machine import differences

    if not sessions:
        return ()
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


def _experiment_warnings(sessions: list[Session], spec: Experiment, idx: _Index) -> list[Diagnostic]:
    """What the reader should know about the sessions and sides before trusting any row."""
    warnings = []
    if spec.variants[0].external:
        for v in spec.variants:
            n = sum(1 for s in sessions if s.side == v.name)
            if n == 1:
                warnings.append(Diagnostic(Kind.ONE_SESSION, f"one session (boot) of side {v.name!r}: sessions are a "
                                           "random effect and between-boot variation is not estimated; run each "
                                           "side in >= 2 sessions", {"side": v.name}))
    for s in sessions:  # interrupted, aborted, or its runner still running (or killed)
        if s.status != "finished":
            warnings.append(Diagnostic(Kind.UNFINISHED, f"session {s.id} is not finished (status {s.status}): this "
                                       "report counts only the runs stored so far; continue it with "
                                       "`perfab run SPEC --resume`", {"session": s.id, "status": s.status}))
    warnings += [_one_draw(s) for s in sessions if _repeats_one_boot(s)]
    workloads = {json.dumps(definitions(s), sort_keys=True) for s in sessions}
    if len(workloads) > 1:
        warnings += diagnostics(Kind.WORKLOADS_CHANGED,
                                "the workloads changed between sessions: runs of different commands are pooled",
                                definitions=len(workloads))
        warnings += _parser_changes(sessions)
    warnings += pooled_warnings(sessions, spec)
    if spec.order == "sequential":
        warnings += diagnostics(Kind.SEQUENTIAL_ORDER,
                                "sequential order: slow drift of the machine is confounded with the change",
                                order=spec.order)
    for w in spec.workloads:
        info = idx.workload_info(w, ())
        for variant, reasons in info.failed.items():
            warnings.append(Diagnostic(Kind.FAILED_RUNS, f"{info.name}: {len(reasons)} failed run(s) on {variant} "
                                       f"(first: {reasons[0]})",
                                       {"workload": info.name, "side": variant, "runs": len(reasons)}))
    return warnings


PLACED = ("I1 ", "LL ", "branch", "indirect")  # rows a simulator's counts of which move with where the code sits


def _one_placement(rows: list[Row], sessions: list[Session], backend) -> tuple[Diagnostic, ...]:
    """Under a simulator on this machine (cachegrind) without layout builds, the `**` rows whose counts move with
    where the code sits: each side's code has one placement, and its counts repeat it exactly."""
    if not sessions or not backend.simulated or backend.boots_kernels or stored(sessions[-1].design).unit != RUN:
        return ()
    placed = [r for r in rows if r.verdict == Verdict.CHANGE and r.metric.startswith(PLACED)]
    if not placed:
        return ()
    names = ", ".join(dict.fromkeys(r.label for r in placed))
    return (Diagnostic(Kind.ONE_LAYOUT, f"{names}: `**` from one build per side, whose code sits at one place: a "
                       "change in cache or branch counts can be that placement's accident (Mytkowicz et al. 2009); "
                       "build the sides with perfab, {layout_cflags} in their build command, for layout builds "
                       "(experiment.layout_builds) that judge them across code offsets", {"rows": len(placed)}),)


DETERMINISTIC_STARTS = ("snapshot", "boot (measure.snapshot = false)")  # guest starts that repeat one draw unperturbed


def _repeats_one_boot(session: Session) -> bool:
    """A guest session whose runs of a side all went on from one saved guest, or booted alike, unperturbed: a
    session stored before perfab made boots its unit, or one run with ``experiment.perturb = false``."""
    replication = stored(session.design)
    starts = {f.get("guest_start") for f in session.sources.values() if isinstance(f, dict)}
    return (declared(session.backend).boots_kernels and replication.unit == RUN and not replication.perturbed
            and bool(starts & set(DETERMINISTIC_STARTS)))


def _one_draw(session: Session) -> Diagnostic:
    return Diagnostic(Kind.ONE_DRAW, f"session {session.id}: every run of a side went on from one saved guest (or "
                      "booted alike), unperturbed, so its runs repeat one boot (one draw of layout, timer phase and "
                      "interleaving): its verdicts are per run and can be a boot's accident; run the experiment "
                      "again with boots as the unit (measure.boots, experiment.perturb = true, the default)",
                      {"session": session.id})


def _parser_changes(sessions: list[Session]) -> list[Diagnostic]:
    """One warning per workload whose parser (or its options) differs between sessions, naming each parser."""
    seen: dict[str, list[str]] = defaultdict(list)
    for s in sessions:
        for name, workload in (definitions(s) or {}).items():
            if workload["parser"] not in seen[name]:
                seen[name].append(workload["parser"])
    return [Diagnostic(Kind.PARSER_CHANGED, f"{name}: sessions read their outputs with different parsers "
                       f"({'; then '.join(p)}): runs that one parser could not read are missing from the pool, "
                       "which may be a biased subset; run the fixed spec into a fresh --db",
                       {"workload": name, "parsers": list(p)}) for name, p in seen.items() if len(p) > 1]
