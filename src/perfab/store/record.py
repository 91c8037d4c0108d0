"""What the runner stores for one run."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfab.metrics import Metric


@dataclass(frozen=True)
class RunRecord:
    """One finished (or failed) run, as stored."""

    status: str  # ok | failed | interrupted
    reason: str | None  # why a run failed, in words
    started_at: float  # unix time the run began
    wall_s: float | None  # elapsed time from spawn to reap
    user_s: float | None  # user CPU time of the workload (wait4 rusage)
    sys_s: float | None  # system CPU time of the workload
    max_rss_kb: int | None  # peak resident set size
    nvcsw: int | None  # voluntary context switches
    nivcsw: int | None  # involuntary context switches
    exit_code: int | None  # exit status when it exited
    signal: int | None  # signal number when a signal killed it
    timed_out: bool  # killed by perfab at the workload's timeout
    stdout: bytes  # the first stdout_cap bytes of stdout
    stderr: bytes  # the first stdout_cap bytes of stderr
    stdout_bytes: int  # total bytes written to stdout
    stderr_bytes: int  # total bytes written to stderr
    metrics: dict[str, float] = field(default_factory=dict)  # measured values (finite)
    excluded: dict[str, str] = field(default_factory=dict)  # metric -> reason it is unusable in this run
    notes: tuple[str, ...] = ()  # facts the backend reported
    meta: dict[str, Metric] = field(default_factory=dict)  # metric -> its unit, direction and origin as produced
    sources: dict[str, str] = field(default_factory=dict)  # metric -> rusage | backend | parser | service | machine
    profile: dict[str, float] = field(default_factory=dict)  # profile key -> self share, percent of samples
    transient: bool = False  # failed by a race of the measuring tool: the runner runs it again (not stored)
