"""What every results store answers: the interface the runner, the analysis and the CLI rely on.

Two stores implement it: ``perfab.store.sqlite.Store`` (one file, one
machine) and ``perfab.store.postgres.PostgresStore`` (one server, a fleet of
machines).  ``tests/store_contract`` asks both the same questions and
checks that they answer identically.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from perfab.plan import PlannedRun
from perfab.store.dataset import Dataset, MetricMeta, Session
from perfab.store.record import RunRecord


@runtime_checkable
class ResultStore(Protocol):
    """A results database opened for one machine (``machine``); see ``perfab.store.sqlite.Store``."""

    readonly: bool  # opened for reading only: every write is refused
    machine: str  # the machine this store acts for: sessions record it, resumes stay on it

    def close(self) -> None: ...

    def __enter__(self) -> "ResultStore": ...

    def __exit__(self, *exc) -> None: ...

    # -- sessions, claims, runs (the runner's side) ---------------------------

    def start_session(self, name: str, spec_text: str, spec_path: str, spec_hash: str, side: str | None,
                      backend: str, groups: tuple[tuple[str, ...], ...], environment: dict[str, str],
                      plan: list[PlannedRun], sources: dict | None = None) -> int: ...

    def claim(self, session: int, takeover: bool = False) -> None: ...

    def finish_session(self, session: int, status: str, stop_reason: str | None = None) -> None: ...

    def extend_plan(self, session: int, runs: list[PlannedRun]) -> None: ...

    def record_run(self, session: int, planned: PlannedRun, rec: RunRecord) -> int: ...

    def unfinished_session(self, name: str) -> Session | None: ...

    def remaining(self, session: int) -> list[PlannedRun]: ...

    def planned(self, session: int) -> list[PlannedRun]: ...

    # -- reading (the analysis' side) -----------------------------------------

    def experiments(self) -> list[str]: ...

    def latest_experiment(self) -> str: ...

    def sessions(self, name: str) -> list[Session]: ...

    def run_rows(self, name: str, all_attempts: bool = False) -> list[dict]: ...

    def samples(self, name: str) -> list[tuple[int, str, float]]: ...

    def exclusions(self, name: str) -> list[tuple[int, str, str]]: ...

    def profile_shares(self, name: str) -> list[tuple[int, str, float]]: ...

    def metric_meta(self, name: str) -> dict[tuple[str, str], MetricMeta]: ...

    def output(self, run_id: int) -> tuple[bytes, bytes]: ...

    def load(self, name: str) -> Dataset: ...
