"""Turning one execution into a stored run: rusage, the backend's readings, the workload's output.

Every value stored is finite, and no reading is dropped without a reason:
a reading of inf or nan (or one a backend could not take, given as None)
is left out of that run's metric with the reason stored beside the run
(``RunRecord.excluded``), and so is a metric the spec declares that the
workload's output did not give in a run (a ``keyvalue`` line printing
``nan`` is no ``name: number`` line).  The analysis then uses the other
runs for that row and says how many (``perfab.analyse.compare``); the run
itself, and its other metrics, stand.  Each sample keeps its source
(rusage, backend, parser, service) so a workload printing ``self.x`` is
never taken for a profile, and profile shares are stored apart.

Rusage is the workload's own or it is left out with the reason: under
``perf stat`` the reaped child is perf, so user and system time come from
perf's ``user_time``/``system_time`` (perf's wait4 rusage of the
workload) and max RSS and context switches are excluded; under valgrind
every rusage figure is the simulator's.
"""

from __future__ import annotations

from math import isfinite
import signal
from dataclasses import replace
from functools import lru_cache
from typing import Callable

from perfab.errors import PerfabError
from perfab.metrics import RUSAGE, RUSAGE_FIELDS, SERVICE, Metric, resolve
from perfab.run.backends import Backend
from perfab.run.execution import Execution
from perfab.specfile import Workload
from perfab.store import RunRecord
from perfab.terminal import visible



def record(ex: Execution, started: float, measurement, parse, backend: Backend, workload: Workload,
           rusage_override: dict | None = None) -> RunRecord:
    """The stored run for one execution (see the module docstring)."""
    metrics: dict[str, float] = {}
    sources: dict[str, str] = {}
    meta: dict[str, Metric] = {}
    code, sig = ex.exit_code, ex.signal
    reason = failure(ex, workload, code, sig)
    excluded: dict[str, str] = {}
    notes: tuple[str, ...] = ()
    profile: dict[str, float] = {}
    if ex.error is None:
        got, excluded, notes = _rusage(ex, backend, measurement, rusage_override)
        _add(metrics, sources, got, "rusage")
        meta.update(RUSAGE)
    if measurement is not None:
        _add(metrics, sources, measurement.metrics, "backend")
        excluded.update(measurement.excluded)
        notes = tuple(measurement.notes) + notes
        profile = dict(getattr(measurement, "profile", {}) or {})
        meta.update({m: _backend_metric(m, i) for m, i in backend.metric_info().items() if m in measurement.metrics})
        reason = measurement.failure or reason  # the backend knows more than an exit status
    if reason is None and parse is not None and (ex.stdout_bytes > len(ex.stdout) or ex.stderr_bytes > len(ex.stderr)):
        cut = max(ex.stdout_bytes, ex.stderr_bytes)
        reason = (f"output not parsed: it was cut at experiment.stdout_cap ({len(ex.stdout):,} of {cut:,} bytes "
                  "kept), and a parser reading part of it could read the wrong figure; raise stdout_cap")
    if reason is None and parse is not None:
        try:
            parsed = parse(ex.stdout.decode(errors="replace"), ex.stderr.decode(errors="replace"))
        except PerfabError as e:
            reason = f"output not parsed: {e}"
        else:
            clash = sorted(set(parsed) & set(metrics))
            _add(metrics, sources, {m: p.value for m, p in parsed.items() if m not in clash}, "parser")
            meta.update({m: parsed_metric(m, p) for m, p in parsed.items() if m not in clash})
            if clash:
                notes += (f"the workload printed {', '.join(clash)}, which perfab measures itself: its own "
                          "figure is kept",)
    if reason is None:
        unusable, profile, more = _unusable(metrics, profile)
        excluded.update(unusable)
        notes += more
        if parse is not None:
            excluded.update(_missing(workload, metrics, excluded, backend))
    transient = bool(reason) and measurement is not None and measurement.transient and reason == measurement.failure
    return RunRecord("failed" if reason else "ok", visible(reason) if reason else None, started, ex.wall_s, ex.user_s,
                     ex.sys_s, ex.max_rss_kb, ex.nvcsw, ex.nivcsw, code, sig, ex.timed_out, ex.stdout,
                     ex.stderr, ex.stdout_bytes, ex.stderr_bytes, metrics if reason is None else {}, excluded, notes,
                     meta, sources, profile if reason is None else {}, transient)


def parsed_metric(name: str, parsed) -> Metric:
    """The metric a parser read (``perfab.parsers.ParsedMetric``): its unit and direction as the parser gave them."""
    return _parsed(name, parsed.unit, parsed.higher_is_better)


@lru_cache(maxsize=4096)
def _parsed(name: str, unit: str | None, higher_is_better: bool | None) -> Metric:
    """Every run of a workload prints the same metrics: each is resolved once."""
    return resolve(name, unit=unit, higher_is_better=higher_is_better, exact=False, origin="parser")


@lru_cache(maxsize=4096)
def _backend_metric(name: str, known: Metric) -> Metric:
    """A backend's metric as stored: every run of a session reads the same ones, each resolved once."""
    return resolve(name, known=known, origin="backend")


def _add(metrics: dict, sources: dict, values: dict, source: str) -> None:
    metrics.update(values)
    sources.update(dict.fromkeys(values, source))


def rusage_readings(read: Callable[[str], float | int | None]) -> dict[str, float | None]:
    """Each rusage metric as a float, from the run field ``RUSAGE_FIELDS`` names (``read(field)``);
    None where unknown."""
    return {m: None if (v := read(f)) is None else float(v) for m, f in RUSAGE_FIELDS.items()}


def rusage_of(ex: Execution) -> dict[str, float]:
    """``rusage_readings`` of an execution, those it knows (max RSS may be unknown), spelled out: every run
    reads them."""
    got = {"wall_s": float(ex.wall_s), "user_s": float(ex.user_s), "sys_s": float(ex.sys_s),
           "vcsw": float(ex.nvcsw), "ivcsw": float(ex.nivcsw)}
    if ex.max_rss_kb is not None:
        got["max_rss_kb"] = float(ex.max_rss_kb)
    return got


def _rusage(ex: Execution, backend: Backend, measurement, override: dict | None) -> tuple[dict, dict, tuple]:
    """(rusage metrics that are the workload's, exclusions with reasons, notes)."""
    own = rusage_of(ex) if override is None else {m: v for m, v in override.items() if v is not None}
    excluded: dict[str, str] = {}
    wrapper = backend.wraps_workload
    if wrapper and backend.simulated:
        return {}, {}, ()  # a simulator's (valgrind's, QEMU's) own figures: the report leaves rusage out
    if wrapper:
        theirs = dict(getattr(measurement, "rusage", {}) or {}) if measurement is not None else {}
        keep = {"wall_s": own.get("wall_s")}
        for m in ("user_s", "sys_s"):
            if theirs.get(m) is not None:
                keep[m] = theirs[m]
            else:
                excluded[m] = f"not measured: {backend.name} did not report the workload's own"
        note = (f"max RSS and context switches are left out under {backend.name}: wait4 reports "
                f"{backend.name}'s own figures (use the time backend, or count context-switches as an event); "
                f"user and sys time are {backend.name}'s rusage of the workload")
        return {m: v for m, v in keep.items() if v is not None}, excluded, (note,)
    if "max_rss_kb" not in own:
        excluded["max_rss_kb"] = "not measurable (at most perfab's own peak RSS)"
    return own, excluded, ()


def _unusable(metrics: dict[str, float], profile: dict[str, float]) -> tuple[dict, dict, tuple[str, ...]]:
    """Readings that are no finite number, taken out of ``metrics`` (in place) with their reasons; the profile
    (left out whole when a share is not finite), and a note saying so."""
    excluded = {}
    # A finite float, what nearly every reading is, is told without a call.
    for name in [m for m, v in metrics.items() if not (type(v) is float and isfinite(v)) and not _finite(v)]:
        value = metrics.pop(name)
        excluded[name] = ("not read: the backend could not take it" if value is None
                          else f"not a finite number ({value!r})")
    if not profile or all(_finite(v) for v in profile.values()):
        return excluded, profile, ()
    bad = next(s for s, v in profile.items() if not _finite(v))
    return excluded, {}, (f"the profile was left out: symbol {bad!r} has a share that is not a finite number",)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and isfinite(value)


def _missing(workload: Workload, metrics: dict, excluded: dict, backend: Backend) -> dict[str, str]:
    """Metrics the spec declares that only the workload's output can give, missing from this run's output."""
    others = backend.metric_info()
    expected = [m.name for m in workload.metrics if m.name not in metrics and m.name not in excluded
                and m.name not in RUSAGE and m.name not in SERVICE and m.name not in others
                and not m.name.startswith(("service.", "interrupts."))]
    return {name: "not in the workload's output in this run (no finite value printed for it)" for name in expected}


def failure(ex: Execution, workload: Workload, code: int | None, sig: int | None) -> str | None:
    """Why the execution failed, in words, or None; ``code`` and ``sig`` are its exit code and signal."""
    if ex.error:
        return ex.error
    if ex.timed_out:
        return f"timed out after {workload.timeout_s:g} s"
    if sig is not None:
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    if code:
        tail = ex.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f"exit status {code}" + (f": {tail[0][:120]}" if tail else "")
    return None


def interrupted(rec: RunRecord, why: str) -> RunRecord:
    """The record of a run abandoned at a signal: kept, and run again by ``--resume``."""
    return replace(rec, status="interrupted", reason=why, metrics={}, excluded={}, meta={}, sources={}, profile={})
