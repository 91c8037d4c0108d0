"""What is read around one run besides the workload itself.

The service's usage (CPU time, system calls) and its perf counters, and the
machine's interrupt counts, are read before and after the run and added to
its record as samples of their own source (``service``, ``machine``).  A
service that died during the run fails the run with the reason.
"""

from __future__ import annotations

from dataclasses import replace

from perfab.machine.interrupts import interrupt_deltas, read_interrupts
from perfab.metrics import SERVER_PER_REQUEST, SERVICE, resolve, service_metrics
from perfab.run.context import SideContext
from perfab.specfile import Experiment, Workload
from perfab.store import RunRecord


class Around:
    """What is read around one run besides the workload: the service's usage and counters, interrupt counts."""

    def __init__(self, exp: Experiment, ctx: SideContext, counter, machine_interrupts: bool = True):
        self.ctx, self.counter = ctx, counter
        self.rows = exp.measure.interrupts if machine_interrupts else ()  # else the backend reads them itself
        self.usage = ctx.service_usage()
        self.irq = read_interrupts(self.rows) if self.rows else None
        self.served = None

    def start(self) -> str | None:
        return self.counter.start() if self.counter is not None else None

    def stop_counting(self) -> None:
        if self.counter is not None and self.served is None:
            self.served = self.counter.stop()

    def finish(self, rec: RunRecord, backend, measurement=None) -> RunRecord:
        if self.served is not None:
            rec = _with_service_counters(rec, self.served, backend)
        if self.rows:
            rec = _with_interrupts(rec, self.irq, read_interrupts(self.rows), self.rows)
        usage = getattr(measurement, "service", None)
        if usage and self.ctx.service is None:  # the backend ran the service (in a guest) and read its usage
            rec = _with_usage(rec, usage.get("before"), usage.get("after"), self.ctx.workload)
            return _with_server_counts(rec, usage.get("counts") or {}, self.ctx.workload)
        return _with_service(rec, self.ctx, self.usage, self.ctx.workload)


def _with_service(rec: RunRecord, ctx: SideContext, before, workload: Workload) -> RunRecord:
    """The service's CPU time over the run (and per request), or the run failed if the service died in it."""
    if ctx.service is None:
        return rec
    problem = ctx.service_problem()
    if problem is not None and rec.status != "interrupted":
        reason = problem if rec.status == "ok" else f"{problem}; the run: {rec.reason}"
        return replace(rec, status="failed", reason=reason, metrics={}, profile={})
    return _with_usage(rec, before, ctx.service_usage(), workload)


def _with_usage(rec: RunRecord, before: dict | None, after: dict | None, workload: Workload) -> RunRecord:
    """The service's usage metrics over the run (``perfab.metrics.service_metrics``), per request too."""
    if rec.status != "ok" or before is None or after is None:
        return rec
    requests = rec.metrics.get(workload.service.requests_metric or "")
    got = service_metrics(before, after, requests)
    unread = {m: "not read: the server's system calls (/proc/PID/io) could not be read in this run"
              for m in _CALLS + (tuple(f"{c}_per_req" for c in _CALLS) if requests else ()) if m not in got}
    metrics = {**rec.metrics, **got}
    meta = {**rec.meta, **{m: SERVICE[m] for m in (*got, *unread)}}
    sources = {**rec.sources, **{m: "service" for m in (*got, *unread)}}
    return replace(rec, metrics=metrics, excluded={**rec.excluded, **unread}, meta=meta, sources=sources)


_CALLS = ("service_reads", "service_writes")  # read from /proc/PID/io: absent when it could not be read, never 0


def _with_server_counts(rec: RunRecord, counts: dict[str, float], workload: Workload) -> RunRecord:
    """What the vCPUs a guest's server was pinned to ran (``service.instructions:u/k``), per request too."""
    if rec.status != "ok" or not counts:
        return rec
    got = dict(counts)
    requests = rec.metrics.get(workload.service.requests_metric or "")
    if requests:
        got.update({SERVER_PER_REQUEST[m]: v / requests for m, v in counts.items() if m in SERVER_PER_REQUEST})
    meta = {m: SERVICE[m] if m in SERVICE else resolve(m, simulated=True, origin="service") for m in got}
    return replace(rec, metrics={**rec.metrics, **got}, meta={**rec.meta, **meta},
                   sources={**rec.sources, **{m: "service" for m in got}})


def _with_service_counters(rec: RunRecord, served, backend) -> RunRecord:
    """The server's counters over the run (``service.<event>``), judged like the client's."""
    if rec.status != "ok":
        return rec
    metrics, excluded = served
    info = backend.metric_info()
    meta = {m: resolve(m, simulated=backend.simulated) for m in (*metrics, *excluded)
            if m.removeprefix("service.") in info}
    return replace(rec, metrics={**rec.metrics, **metrics}, excluded={**rec.excluded, **excluded},
                   meta={**rec.meta, **meta}, sources={**rec.sources, **{m: "service" for m in (*metrics, *excluded)}})


def _with_interrupts(rec: RunRecord, before, after, rows) -> RunRecord:
    """The machine's interrupt counts over the run (``perfab.machine.interrupts``)."""
    if rec.status != "ok":
        return rec
    got, excluded = interrupt_deltas(before, after, rows)
    meta = {m: resolve(m, origin="machine") for m in (f"interrupts.{r}" for r in rows)}
    return replace(rec, metrics={**rec.metrics, **got}, excluded={**rec.excluded, **excluded},
                   meta={**rec.meta, **meta}, sources={**rec.sources, **{m: "machine" for m in meta}})
