"""The measurement backend seam.

A backend decides how one run is measured.  The runner executes whatever argv
the backend returns from ``wrap`` (sleeping in ``wait4`` meanwhile), then asks
the backend to ``collect`` its readings from the run's scratch directory.

- ``time``: nothing wraps the workload; rusage from ``wait4`` only.
- ``perf``: ``perf stat`` wraps the workload, one counter group per run.
- ``cachegrind``: valgrind's simulated caches wrap the workload.
- ``guest``: each run boots the side's kernel under QEMU and runs the
  workload inside (``perfab.kernel``); a TCG plugin counts the whole guest.

``prepare`` gets what the sides need (a kernel built, a probe) before the
session is stored; ``for_side`` gives the backend that measures one side's
runs (the guest backend binds the side's kernel; the others are the same
for every side).

``groups()`` lists the counter groups a run can carry; the planner spreads
the runs of each side over them (seed 000: 10 runs with ``:u``, 10 with
``:k``).  Backends without groups return ``((),)``: one empty group.

Besides measuring, a backend states what the rest of perfab asks of it by
name, so that nothing else branches on a backend's name: its declaration
(``perfab.specfile.backends``: its ``[measure]`` keys and those it cannot do
without, its rusage policy, whether it counts a service, whether its sides
boot kernels, how the report's SETUP describes it).  The declaration lives
below the spec and the analysis, which ask it; a class made with
``declaration=`` carries its fields as class attributes (``DECLARED``).
``perfab.run.backends.BACKENDS`` lists the classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Protocol

from perfab.errors import UsageError
from perfab.metrics import Metric
from perfab.specfile.backends import Declaration, Required  # noqa: F401 (Required: the seam's type, re-exported)


@dataclass(frozen=True)
class Measurement:
    """What a backend read for one run."""

    metrics: dict[str, float]  # metric name -> value, in the metric's unit
    excluded: dict[str, str] = field(default_factory=dict)  # metric -> why this run's value is unusable
    notes: tuple[str, ...] = ()  # facts about the run worth keeping (e.g. "workload killed by SIGSEGV")
    failure: str | None = None  # set when the backend itself failed: the run counts as failed
    rusage: dict[str, float] = field(default_factory=dict)  # the workload's own user_s/sys_s, read by a wrapper
    profile: dict[str, float] = field(default_factory=dict)  # profile key -> self share, percent of samples
    transient: bool = False  # the failure is a race of the measuring tool, not the workload's: run it again
    service: dict[str, dict[str, float]] = field(default_factory=dict)  # the server's usage read in a guest:
    # "before"/"after" the run -> user_s, sys_s, run_ns, syscr, syscw (as SideContext.service_usage gives)


# What every backend class states, from its declaration (the registry's test checks each one states all of them):
DECLARED = {f.name: f for f in fields(Declaration)}


class Backend(Protocol):
    """How a run is measured; see the module docstring."""

    name: str
    wraps_workload: bool  # the executed command is the backend's tool, not the workload: rusage is not its own
    own_interrupts: bool  # the backend reads measure.interrupts itself (in a guest), not this machine's
    simulated: bool  # the workload runs in a simulator (valgrind, QEMU): the wrapper's rusage is not its own
    stderr_file: str | None  # scratch file the runner fills with the run's stderr tail for ``collect``; None: none

    def preflight(self, exp, variants: tuple) -> None:
        """Check what the sides need of this backend (a kernel image, rows to count) before anything is stored,
        built or run, the same for ``plan`` and ``run``; a UsageError names the key and the fix."""
        ...

    def prepare(self, variants: tuple, say) -> None:
        """Make ready what the sides need (build kernels, probe the accelerator); errors before any run."""
        ...

    def side_sources(self) -> dict[str, dict]:
        """What each prepared side runs besides its programs (a booted kernel), stored in the session's sources."""
        ...

    def for_side(self, variant, workload) -> "Backend":
        """The backend that measures the runs of ``workload`` on ``variant``."""
        ...

    def plan_lines(self, variants: tuple) -> list[str]:
        """What ``perfab plan`` says this backend will do for these sides besides running them (boots, builds)."""
        ...

    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The counter groups, each carried by some of the runs."""
        ...

    def wrap(self, argv: list[str], scratch: Path, group: tuple[str, ...]) -> list[str]:
        """The argv to execute for one run of ``argv`` carrying ``group``."""
        ...

    def collect(self, scratch: Path, group: tuple[str, ...], status: int) -> Measurement:
        """Read the run's metrics; ``status`` is the raw ``wait4`` status."""
        ...

    def metric_info(self) -> dict[str, Metric]:
        """The metrics this backend produces (``perfab.metrics.resolve``), unless the spec overrides them."""
        ...

    @classmethod
    def from_measure(cls, measure) -> "Backend":
        """The backend a spec's ``[measure]`` table asks for."""
        ...

    @classmethod
    def counted(cls, groups: tuple[tuple[str, ...], ...]) -> str:
        """What a run of this backend counts, for a report's SETUP (``groups``: the stored counter groups)."""
        ...

    def service_counter(self, group: tuple[str, ...], scratch: Path, pids: list[int], cpus: str | None):
        """What counts the workload's service over one run (``start``/``stop``/``read``), or None."""
        ...


class Declares:
    """The defaults of every backend's methods that answer declarations, and the declarations themselves:
    a subclass made with ``declaration=`` (``perfab.specfile.backends``) carries each of its fields as a class
    attribute, and its ``counted`` words as a class method."""

    stderr_file: str | None = None  # collect reads no stderr of the run

    def __init_subclass__(cls, declaration: Declaration | None = None, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if declaration is None:
            return
        cls.declaration = declaration
        for f in fields(Declaration):
            if f.name != "counted":
                setattr(cls, f.name, getattr(declaration, f.name))

    @classmethod
    def counted(cls, groups: tuple[tuple[str, ...], ...]) -> str:
        """What a run of this backend counts, for a report's SETUP: its declaration's words."""
        return cls.declaration.counted(groups)

    def for_run(self, values: dict[str, str], service: dict | None, draw=None) -> "Declares":
        """The backend for one run with these placeholder values, this expanded service and this perturbation
        (``perfab.replication.Draw``, or None); the same here."""
        return self

    def replication(self, exp, seed: int):
        """How this backend's runs relate to independent draws (``perfab.replication``): each run is its own,
        and nothing is perturbed (a run on this machine draws its own layout)."""
        from perfab.replication import RUN, Replication

        return Replication(RUN, 1, 0)  # nothing drawn: no seed to keep

    def side_sources(self) -> dict[str, dict]:
        """Nothing besides the sides' programs."""
        return {}

    def service_counter(self, group: tuple[str, ...], scratch: Path, pids: list[int], cpus: str | None):
        """Nothing counts the service: its CPU time and I/O are read from /proc all the same."""
        return None


class SameForEverySide(Declares):
    """The defaults of a backend that measures every side alike on this machine."""

    def preflight(self, exp, variants: tuple) -> None:
        """Every ``measure.interrupts`` row exists in this machine's /proc/interrupts (else it would never count)."""
        from perfab.machine.interrupts import missing_rows

        missing = missing_rows(exp.measure.interrupts)
        if missing:
            raise UsageError(f"{exp.path}: measure.interrupts: no row {missing[0]!r} in this machine's "
                             "/proc/interrupts (its rows are the names before the colon, e.g. TLB, CAL, RES); "
                             "remove it or name a row this machine has")

    def prepare(self, variants: tuple, say) -> None:
        """Nothing to make ready."""
        return None

    def for_side(self, variant, workload) -> "SameForEverySide":
        """This backend, whatever the side."""
        return self

    def plan_lines(self, variants: tuple) -> list[str]:
        """Nothing besides the runs."""
        return []
