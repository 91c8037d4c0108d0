"""``perfab plan``: the run order a spec gives, with builds, setups, service starts and stops around it."""

from __future__ import annotations

import shlex

from perfab.plan import PlannedRun
from perfab.spec import Experiment, expand, placeholders, workload_placeholders


def build_lines(sources: dict) -> list[str]:
    """What is checked out and built before the first run, one line per step."""
    out = []
    for name, s in sources.items():
        if s.commit:
            subject = f' ("{s.subject}")' if s.subject else ""
            out.append(f"build  {name}: git {s.ref} = {s.commit[:12]}{subject}, checked out in {s.src}")
        if s.command:
            out.append(f"build  {name}: {shlex.join(s.command)}  (in {s.src}; log {s.log})")
    return out


def plan_lines(exp: Experiment, plan: list[PlannedRun], groups: tuple[tuple[str, ...], ...],
               sources: dict | None = None) -> list[str]:
    """One line per run; ``>`` lines say what starts before a run, ``<`` lines what stops after it."""
    return _Lines(exp, sources or {}).render(plan, groups)


class _Lines:
    def __init__(self, exp: Experiment, sources: dict):
        self.exp, self.sources = exp, sources

    def render(self, plan: list[PlannedRun], groups) -> list[str]:
        out: list[str] = []
        current: tuple | None = None
        workload_name: str | None = None
        for p in plan:
            key = (p.workload, p.variant, p.params)
            if key != current:
                if current is not None:
                    out += self._leave(*current)
                if p.workload != workload_name:
                    if workload_name is not None:
                        out += self._workload_teardown(workload_name)
                    out += self._workload_setup(p.workload)
                    workload_name = p.workload
                out += self._enter(*key)
                current = key
            kind = "warm-up" if p.warmup else f"block {p.block}"
            events = ",".join(groups[p.group]) or "-"
            point = " ".join(f"{k}={v}" for k, v in p.params)
            line = f"{p.seq:5d}  {p.workload:<20} {p.variant:<16} {kind:<10} {events}"
            out.append(line + (f"  {point}" if point else ""))
        if current is not None:
            out += self._leave(*current) + self._workload_teardown(current[0])
        return out

    def _workload_setup(self, name: str) -> list[str]:
        workload = self.exp.workload(name)
        own = workload_placeholders(self.exp, workload)
        return [f"       > workload setup: {expand(c, own)}" for c in workload.setup]

    def _workload_teardown(self, name: str) -> list[str]:
        workload = self.exp.workload(name)
        own = workload_placeholders(self.exp, workload)
        return [f"       < workload teardown: {expand(c, own)}" for c in workload.teardown]

    def _values(self, workload: str, variant: str, params) -> dict[str, str]:
        source = self.sources.get(variant)
        return placeholders(self.exp, self.exp.variant(variant), self.exp.workload(workload), params,
                            source.values() if source is not None else None)

    def _enter(self, workload: str, variant: str, params) -> list[str]:
        values = self._values(workload, variant, params)
        lines = [f"       > setup of {variant}: {expand(c, values)}" for c in self.exp.variant(variant).setup]
        svc = self.exp.workload(workload).service
        if svc is not None:
            argv = shlex.join(expand(a, values) for a in svc.argv)
            port = f", wait for 127.0.0.1:{svc.port}" if svc.port else ""
            lines.append(f"       > start service for {variant}: {argv}{port}")
        return lines

    def _leave(self, workload: str, variant: str, params) -> list[str]:
        values = self._values(workload, variant, params)
        lines = [f"       < stop service of {variant}"] if self.exp.workload(workload).service is not None else []
        lines += [f"       < teardown of {variant}: {expand(c, values)}" for c in self.exp.variant(variant).teardown]
        return lines
