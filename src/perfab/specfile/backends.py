"""What each measurement backend declares: its name, its ``[measure]`` keys and what the rest of perfab asks of it.

A backend plugin has two halves.  Its behaviour (how a run is wrapped and
its readings collected) lives with the runner, in ``perfab.run.backends``.
Its declarations live here, below the spec's schema, the analysis and the
report, which ask them by a stored session's backend name: the keys it
reads and those it cannot do without, its rusage policy, whether it counts
a service and with what, whether its sides boot kernels, and the words the
report's SETUP uses for what it counted.  Nothing outside the two halves
branches on a backend's name.

Adding a backend is a ``Declaration`` here, one line in ``DECLARATIONS``,
and its class in ``perfab.run.backends`` made with ``declaration=``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfab.errors import UsageError
from perfab.specfile import checks
from perfab.specfile.keys import BackendKeys, Key
from perfab.specfile.kinds import Bool, Choice, Integer, Strings, Text

ACCELS = ("auto", "tcg", "kvm")
GUEST_ROOTS = ("initramfs", "host")  # what a guest runs from: the files copied in, or this machine's root
GEOMETRY = Text(checks.geometry)  # a cache geometry "size,assoc,line"
HOST = "the host's"  # the README's default of a geometry: the host's caches
RUSAGE_COUNTED = "wall/user/sys time, max RSS, context switches (wait4 rusage)"  # what the runner reads itself


@dataclass(frozen=True)
class Required:
    """A ``[measure]`` key a backend cannot do without (absent or empty is refused)."""

    key: str  # the key under [measure]
    problem: str  # why it is needed, e.g. "the perf backend needs events to count"
    fix: str  # what to write instead


@dataclass(frozen=True)
class Declaration:
    """What one backend states about itself, asked by name wherever a session's backend matters."""

    name: str  # the spec's [measure] backend value, stored with each session
    counted: Callable[[tuple[tuple[str, ...], ...]], str]  # the report's SETUP words, given the stored groups
    measure_keys: BackendKeys = BackendKeys()  # its own [measure] keys, which every other backend refuses
    required: tuple[Required, ...] = ()  # keys it cannot do without
    wraps_workload: bool = False  # rusage policy: the executed command is the backend's tool, not the workload
    simulated: bool = False  # rusage policy: the workload runs in a simulator, no rusage figure is its own
    slows_workload: bool = False  # rusage policy: the workload's own time and rate figures time the simulator
    own_readings: bool = False  # it reads more than wait4's rusage (lost with a failed run, which keeps no samples)
    own_interrupts: bool = False  # measure.interrupts are read by the backend (in a guest), not on this machine
    boots_kernels: bool = False  # every side names a [variant.kernel] that each run boots
    counts_service: str | None = None  # what counts a service's processes or CPUs (service_counter), or None
    runs_service: bool = False  # it starts the workload's service itself, beside the workload (in a guest)
    profile_kind: str = "self time, % of samples"  # what a run's profile shares are


def _perf_counted(groups: tuple[tuple[str, ...], ...]) -> str:
    """``perf stat`` and the counter groups the runs carried."""
    return f"perf stat, one group per run: {' | '.join(','.join(g) for g in groups)}"


TIME = Declaration(
    name="time",
    counted=lambda groups: RUSAGE_COUNTED,
    wraps_workload=False,  # wait4 reports the workload itself
    own_readings=False,  # a failed run's row holds every reading (its rusage)
)

PERF = Declaration(
    name="perf",
    counted=_perf_counted,
    measure_keys=BackendKeys((
        Key("counters", Strings(), (), "perf events to count (perf backend), e.g. [\"cycles\", \"instructions:k\"]."),
    )),
    required=(Required("counters", "the perf backend needs events to count",
                       'add counters = ["task-clock", "context-switches"] or use backend = "time"'),),
    wraps_workload=True,  # perf stat is what runs: wall time kept, user/sys as perf reports the workload's
    own_readings=True,  # the counts
    counts_service="perf stat",  # a second perf stat on the service's pids or CPUs (perfservice)
)

CACHEGRIND = Declaration(
    name="cachegrind",
    counted=lambda groups: "valgrind cachegrind (simulated caches, user space only)",
    measure_keys=BackendKeys((
        Key("l1i", GEOMETRY, None, 'cachegrind (or guest cache_sim) I1 geometry "size,assoc,line", e.g. "32K,8,64".',
            HOST),
        Key("l1d", GEOMETRY, None, "cachegrind D1 geometry.", HOST),
        Key("ll", GEOMETRY, None, "cachegrind last-level geometry.", HOST),
        Key("branch_sim", Bool(), False, "cachegrind: simulate branch predictors (--branch-sim=yes); guest backend "
            "under TCG: the plugin simulates the same predictor, split user/kernel."),
        Key("callgrind_toggle", Text(), None, "Count only inside this function (callgrind --toggle-collect)."),
    )),
    wraps_workload=True,
    simulated=True,  # valgrind's rusage is the simulator's, never the workload's
    slows_workload=True,  # the workload's own time and rate figures time valgrind's simulated CPU
    own_readings=True,  # the counts
)


GUEST = Declaration(
    name="guest",
    counted=lambda groups: ("each run boots its side's kernel under QEMU; under TCG perfab's plugin counts the "
                            "whole guest over the workload (instructions, simulated caches, branches and "
                            "coherence, :u user, :k kernel), wall time is emulated"),
    measure_keys=BackendKeys((
        Key("vcpus", Integer(1, 64), 1, 'guest backend: virtual CPUs of each guest, 1..64.'),
        Key("memory", Integer(64, 65536), 512, "guest backend: guest memory in MiB, 64..65536.", field="memory_mb"),
        Key("accel", Choice(ACCELS), "auto",
            f"guest backend: {', '.join(ACCELS)}; auto uses KVM when a short probe boot works, else TCG."),
        Key("files", Strings(), (),
            "guest backend: host files copied into each guest at the same path (the workload's program and its "
            "libraries are copied without asking): regular files or directories of them, 256 MiB in all and at most "
            "half the guest's memory."),
        Key("vmstat", Strings(checks.vmstat_rows), (),
            'guest backend: /proc/vmstat rows counted over each run in the guest, e.g. ["pgfault"]: vmstat.pgfault.'),
        Key("root", Choice(GUEST_ROOTS), "initramfs",
            'guest backend: what the guest runs from: "initramfs" (the workload\'s and its server\'s programs, '
            'their libraries and files, copied in: only these bytes, the same on every side) or "host" (this '
            "machine's root filesystem, read-only over virtio-9p with a tmpfs for writes: scripts, installed "
            "benchmarks and servers run unchanged)."),
        Key("snapshot", Bool(), True,
            "guest backend under TCG: each side's kernel boots once, to the point just before the workload, where "
            "QEMU saves the guest; every run starts from that state and counts what a fresh boot counts. false: "
            "every run boots."),
        Key("boots", Integer(1, 64), 6,
            "guest backend under TCG with snapshot: boots per side and workload in a session, each perturbed by "
            "its own seed and saved at the snapshot point; the runs are spread over them (run k goes on from "
            "boot k mod boots; with fewer runs than boots, a boot per run) and verdicts take the boot as the "
            "unit."),
        Key("cache_sim", Bool(), False,
            "guest backend under TCG: simulate L1i, L1d and LL (geometry from l1i, l1d, ll, else 32K,8,64 / "
            "32K,8,64 / 8M,16,64), split user/kernel."),
        Key("coherence", Bool(), False,
            "guest backend under TCG: a private L1d per vCPU kept coherent by MESI: HITM (transfers of a line "
            "modified by another vCPU) and invalidations, split user/kernel, by kernel symbol and by data line."),
        Key("guest_counters", Strings(), (),
            'guest backend under KVM: perf events counted by perf stat inside the guest on the vPMU (-cpu '
            'host,pmu=on), e.g. ["cycles:u", "instructions:k"]; grouped within max_events_per_run (default: '
            "the host's usable counters), never multiplexed."),
        Key("size", Bool(), False,
            "guest backend, kernels built from source: `perfab size` on each side's vmlinux against the baseline's "
            "when the session begins, stored with it and printed in the report's SIZE block (inline causes when "
            "the kernels are built with DEBUG_INFO)."),
    ), fix=" (with [variant.kernel] sides)", borrows=("l1i", "l1d", "ll"), borrows_when="cache_sim",
        shares=("branch_sim",)),
    wraps_workload=True,  # the executed command is the launcher: wait4's rusage is QEMU's
    simulated=True,  # rusage of the launcher says nothing about the workload
    slows_workload=False,  # its wall time is stored as emulated_wall_s and judged as such
    own_readings=True,  # the plugin's counts and the in-guest counters
    own_interrupts=True,  # measure.interrupts are read inside the guest
    boots_kernels=True,
    counts_service="the TCG plugin's per-vCPU counts",  # of the vCPUs service.cpus pins the server to
    runs_service=True,  # the workload's server starts in the guest, beside the workload
    profile_kind="counted kernel instructions, % per symbol",
)

DECLARATIONS: dict[str, Declaration] = {d.name: d for d in (TIME, PERF, CACHEGRIND, GUEST)}  # the default first
DEFAULT = TIME.name  # the backend of a spec that names none


def declared(name: str) -> Declaration:
    """What backend ``name`` declares (as a spec or a stored session names it)."""
    try:
        return DECLARATIONS[name]
    except KeyError:
        raise UsageError(f"unknown measurement backend {name!r}: this perfab knows {', '.join(DECLARATIONS)}; "
                         "use one of those, or a perfab that knows it") from None


def stored(name: str) -> Declaration:
    """What a stored session's backend declares, for describing it (the default's for a name this version
    does not know)."""
    return DECLARATIONS.get(name) or DECLARATIONS[DEFAULT]


def backend_that(declaration: str) -> str:
    """The name of the first backend whose ``declaration`` is set (e.g. ``boots_kernels``)."""
    return next(d.name for d in DECLARATIONS.values() if getattr(d, declaration))
