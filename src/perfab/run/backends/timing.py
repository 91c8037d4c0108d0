"""The ``time`` backend: nothing wraps the workload; the runner's ``wait4`` rusage is the measurement."""

from __future__ import annotations

from pathlib import Path

from perfab.metrics import Metric
from perfab.run.backends.base import Measurement, SameForEverySide
from perfab.specfile.backends import TIME


class TimeBackend(SameForEverySide, declaration=TIME):
    """No wrapper: the runner's rusage (wall, user, sys, RSS, switches) is the measurement."""

    @classmethod
    def from_measure(cls, measure) -> "TimeBackend":
        """Nothing in ``[measure]`` configures it."""
        return cls()

    def groups(self) -> tuple[tuple[str, ...], ...]:
        return ((),)

    def wrap(self, argv: list[str], scratch: Path, group: tuple[str, ...]) -> list[str]:
        return list(argv)

    def collect(self, scratch: Path, group: tuple[str, ...], status: int) -> Measurement:
        return _NOTHING_READ

    def metric_info(self) -> dict[str, Metric]:
        return {}


_NOTHING_READ = Measurement({})  # what every run reads here: one value, shared (a Measurement is never changed)
