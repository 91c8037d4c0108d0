"""``perfab plan``: a session's schedule, one line per event: builds, setups, service starts, runs, looks, stops."""

from __future__ import annotations

import shlex

from perfab.run.schedule import Build, EnterCell, LeaveCell, Look, Run, Schedule, WorkloadSetup, WorkloadTeardown
from perfab.specfile import Experiment, expand, placeholders, workload_placeholders
from perfab.specfile.backends import declared


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


def schedule_lines(exp: Experiment, schedule: Schedule, groups: tuple[tuple[str, ...], ...],
                   sources: dict | None = None, replication=None) -> list[str]:
    """One line per run; ``>`` lines say what starts before a run, ``<`` lines what stops after it, ``?`` a look.
    With boots or layout builds as the unit (``replication``), each run names the one it goes on from."""
    lines = _Lines(exp, sources or {}, groups, replication)
    out: list[str] = []
    for event in schedule.events:
        out += lines.of(event)
    return out


class _Lines:
    """The lines of each kind of event."""

    def __init__(self, exp: Experiment, sources: dict, groups: tuple[tuple[str, ...], ...], replication=None):
        self.exp, self.sources, self.groups = exp, sources, groups
        self.units = replication if replication is not None and replication.unit != "run" else None
        self.in_guest = declared(exp.measure.backend).runs_service  # the service starts beside each run

    def of(self, event) -> list[str]:
        """The lines one event prints."""
        return {Build: lambda e: build_lines({e.source.variant: e.source}),
                WorkloadSetup: lambda e: self._workload(e.workload, "setup"),
                WorkloadTeardown: lambda e: self._workload(e.workload, "teardown"),
                EnterCell: lambda e: self._enter(*e.cell), LeaveCell: lambda e: self._leave(*e.cell),
                Run: lambda e: [self._run(e.planned)], Look: self._look}[type(event)](event)

    def _look(self, event: Look) -> list[str]:
        return [f"       ? look after block {event.block}: stop if the rows are decided, else schedule the next block"]

    def _run(self, p) -> str:
        kind = "warm-up" if p.warmup else f"block {p.block}"
        events = ",".join(self.groups[p.group]) or "-"
        point = " ".join(f"{k}={v}" for k, v in p.params)
        line = f"{p.seq:5d}  {p.workload:<20} {p.variant:<16} {kind:<10} {events}"
        unit = f"  {self.units.unit} {self.units.unit_of(p.rep)}" if self.units is not None else ""
        return line + unit + (f"  {point}" if point else "")

    def _workload(self, name: str, key: str) -> list[str]:
        workload = self.exp.workload(name)
        own = workload_placeholders(self.exp, workload)
        mark = ">" if key == "setup" else "<"
        return [f"       {mark} workload {key}: {expand(c, own)}" for c in getattr(workload, key)]

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
            if self.in_guest:
                port = f", wait for 127.0.0.1:{svc.port} inside the guest" if svc.port else ""
                cpus = f", pinned to vCPUs {svc.cpus}" if svc.cpus else ""
                lines.append(f"       > service for {variant} in each run's guest, before the workload: {argv}"
                             f"{port}{cpus}")
            else:
                port = f", wait for 127.0.0.1:{svc.port}" if svc.port else ""
                lines.append(f"       > start service for {variant}: {argv}{port}")
        return lines

    def _leave(self, workload: str, variant: str, params) -> list[str]:
        values = self._values(workload, variant, params)
        hosted = self.exp.workload(workload).service is not None and not self.in_guest
        lines = [f"       < stop service of {variant}"] if hosted else []
        lines += [f"       < teardown of {variant}: {expand(c, values)}" for c in self.exp.variant(variant).teardown]
        return lines
