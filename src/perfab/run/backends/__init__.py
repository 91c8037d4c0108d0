"""Measurement backends: how a run is measured (see ``base``)."""

from __future__ import annotations

from pathlib import Path

from perfab.metrics import Metric
from perfab.run.backends.base import Backend, Measurement, SameForEverySide
from perfab.spec import Measure


class TimeBackend(SameForEverySide):
    """No wrapper: the runner's rusage (wall, user, sys, RSS, switches) is the measurement."""

    name = "time"
    wraps_workload = False

    def groups(self) -> tuple[tuple[str, ...], ...]:
        return ((),)

    def wrap(self, argv: list[str], scratch: Path, group: tuple[str, ...]) -> list[str]:
        return list(argv)

    def collect(self, scratch: Path, group: tuple[str, ...], status: int) -> Measurement:
        return Measurement({})

    def metric_info(self) -> dict[str, Metric]:
        return {}


def backend_type(name: str) -> type:
    """The backend class a stored session names (``TimeBackend`` for a name this version does not know)."""
    if name == "perf":
        from perfab.run.backends.perfstat import PerfStatBackend

        return PerfStatBackend
    if name == "cachegrind":
        from perfab.run.backends.cachegrind import CachegrindBackend

        return CachegrindBackend
    if name == "guest":
        from perfab.run.backends.guest import GuestBackend

        return GuestBackend
    return TimeBackend


def make_backend(measure: Measure) -> Backend:
    """The backend a spec's ``[measure]`` table asks for."""
    if measure.backend == "perf":
        from perfab.run.backends.perfstat import PerfStatBackend

        return PerfStatBackend(list(measure.counters), measure.max_events_per_run)
    if measure.backend == "cachegrind":
        from perfab.run.backends.cachegrind import CachegrindBackend

        return CachegrindBackend(l1i=measure.l1i, l1d=measure.l1d, ll=measure.ll,
                                 callgrind_toggle=measure.callgrind_toggle, branch_sim=measure.branch_sim)
    if measure.backend == "guest":
        from perfab.run.backends.guest import GuestBackend

        return GuestBackend(measure)
    return TimeBackend()


__all__ = ["Backend", "Measurement", "TimeBackend", "backend_type", "make_backend"]
