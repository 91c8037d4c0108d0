"""``perfab plan``: the run order a spec gives, with every setup, service start and stop around it."""

from __future__ import annotations

import shlex

from perfab.plan import PlannedRun
from perfab.spec import Experiment, expand, placeholders, workload_placeholders


def plan_lines(exp: Experiment, plan: list[PlannedRun], groups: tuple[tuple[str, ...], ...]) -> list[str]:
    """One line per run; ``>`` lines say what starts before a run, ``<`` lines what stops after it."""
    out: list[str] = []
    current: tuple | None = None
    workload_name: str | None = None
    for p in plan:
        workload = exp.workload(p.workload)
        key = (p.workload, p.variant, p.params)
        if key != current:
            if current is not None:
                out += _leave(exp, *current)
            if p.workload != workload_name:
                if workload_name is not None:
                    out += [f"       < workload teardown: {c}" for c in exp.workload(workload_name).teardown]
                own = workload_placeholders(exp, workload)
                out += [f"       > workload setup: {expand(c, own)}" for c in workload.setup]
                workload_name = p.workload
            out += _enter(exp, *key)
            current = key
        kind = "warm-up" if p.warmup else f"block {p.block}"
        events = ",".join(groups[p.group]) or "-"
        point = " ".join(f"{k}={v}" for k, v in p.params)
        out.append(f"{p.seq:5d}  {p.workload:<20} {p.variant:<16} {kind:<10} {events}" + (f"  {point}" if point else ""))
    if current is not None:
        out += _leave(exp, *current)
        out += [f"       < workload teardown: {c}" for c in exp.workload(current[0]).teardown]
    return out


def _values(exp: Experiment, workload: str, variant: str, params) -> dict[str, str]:
    return placeholders(exp, exp.variant(variant), exp.workload(workload), params)


def _enter(exp: Experiment, workload: str, variant: str, params) -> list[str]:
    values = _values(exp, workload, variant, params)
    lines = [f"       > setup of {variant}: {expand(c, values)}" for c in exp.variant(variant).setup]
    svc = exp.workload(workload).service
    if svc is not None:
        argv = shlex.join(expand(a, values) for a in svc.argv)
        port = f", wait for 127.0.0.1:{svc.port}" if svc.port else ""
        lines.append(f"       > start service for {variant}: {argv}{port}")
    return lines


def _leave(exp: Experiment, workload: str, variant: str, params) -> list[str]:
    values = _values(exp, workload, variant, params)
    lines = [f"       < stop service of {variant}"] if exp.workload(workload).service is not None else []
    lines += [f"       < teardown of {variant}: {expand(c, values)}" for c in exp.variant(variant).teardown]
    return lines
