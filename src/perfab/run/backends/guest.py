"""The guest backend: each run runs the workload inside a QEMU guest of the side's kernel.

The runner executes ``python -m perfab.kernel.launch REQUEST`` for a run;
the launcher boots the side's kernel (``perfab.kernel.qemu``) with a
perfab-built initramfs holding the workload, relays the workload's output
and exit status, and leaves its readings in the run's scratch directory.
Under TCG (``measure.snapshot``, on by default) the first run of a side
boots to the point just before its workload, where QEMU saves the guest,
and every later run starts from that state (``perfab.kernel.snapshot``).

Under TCG, perfab's plugin counts every guest instruction between the
workload's start and its end, split user/kernel (``instructions:u``,
``instructions:k``), optionally with simulated L1i/L1d/LL misses, and the
kernel symbols that executed them (stored as the run's profile, percent of
kernel instructions).  ``branch_sim`` adds cachegrind's branch predictor
(``branches:u``, ``branch mispredicts:k``, the indirect ones apart) and
``coherence`` a private L1d per vCPU kept coherent by MESI (``HITM:k``,
``invalidations:u``); their profile rows are each kernel symbol's share of
the branch mispredictions (``branch-miss% [k] SYM``) and of HITM
(``HITM% [k] SYM``), and each data line's share of HITM
(``HITM% line SYM+0xOFF`` or its address).  These counts are deterministic
(one vCPU or several: guests run under icount) and are the rows to read;
the guest's wall time is emulation time, so it is reported as
``emulated_wall_s`` and judged by rank like any timing.  Under KVM the
plugin cannot run: wall time (``guest_wall_s``) and the in-guest counters
are the readings.  ``/proc/interrupts`` rows (``interrupts.<ROW>``) and
``/proc/vmstat`` rows (``vmstat.<row>``) are read in the guest around the
workload.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from perfab.errors import UsageError
from perfab.metrics import GUEST_CLOCKS, Metric, resolve
from perfab.run.backends.base import Declares, Measurement
from perfab.machine.caches import parse_level
from perfab.replication import POWERED_OFF, RESTORED_NOTE, SAVED_NOTE, longest_boot_word
from perfab.specfile import Experiment, Kernel, Measure, Variant, Workload, checks, expand
from perfab.specfile.backends import GUEST

REQUEST, RESULT = "guest-request.json", "guest-result.json"
# the runner writes the launcher's stderr tail here (guest perf's rows end it)
LAUNCHER_STDERR = "guest-launcher-stderr"
DEFAULT_GEOMETRY = {"l1i": "32K,8,64", "l1d": "32K,8,64", "ll": "8M,16,64"}
SIMULATION_NOTE = ("counts from perfab's QEMU TCG plugin over the workload's window: instructions and simulated "
                   "caches, branches and coherence of the emulated CPU, not of real hardware")
_COUNTS = {  # the launcher's count -> metric name
    "insns_user": "instructions:u", "insns_kernel": "instructions:k",
    "l1i_misses_user": "I1 misses:u", "l1i_misses_kernel": "I1 misses:k",
    "l1d_misses_user": "D1 misses:u", "l1d_misses_kernel": "D1 misses:k",
    "ll_misses_user": "LL misses:u", "ll_misses_kernel": "LL misses:k",
    "hitm_user": "HITM:u", "hitm_kernel": "HITM:k",
    "invalidations_user": "invalidations:u", "invalidations_kernel": "invalidations:k",
}
_BRANCHES = {  # metric base -> the launcher's counts summed (cachegrind's events, as the cachegrind backend does)
    "branches": ("bc", "bi"), "branch mispredicts": ("bcm", "bim"),
    "indirect branches": ("bi",), "indirect mispredicts": ("bim",),
}
_PRIV = {"user": "u", "kernel": "k"}


class GuestBackend(Declares, declaration=GUEST):
    """Boots the side's kernel for every run; see the module docstring."""

    stderr_file = LAUNCHER_STDERR  # a launcher that left no result says why on its stderr

    @classmethod
    def from_measure(cls, measure: Measure) -> "GuestBackend":
        """The guest's size, accelerator and readings from ``[measure]``."""
        return cls(measure)

    def __init__(self, measure: Measure, cache_root: Path = Path(".perfab/kernel")):
        self.measure, self.cache_root = measure, cache_root
        self.kernels: dict[str, object] = {}  # side -> perfab.kernel.sides.KernelImage (resolved by prepare)
        self.specs: dict[str, Kernel] = {}  # side -> its [variant.kernel], placeholders expanded (by preflight)
        self.accel: str | None = None
        self.counters: tuple[str, ...] = tuple(measure.guest_counters)  # vPMU events, counted inside the guest
        self._groups = vpmu_groups(self.counters, measure.max_events_per_run) if self.counters else ((),)
        self.snapshot = measure.snapshot  # runs start from the side's saved guest (under TCG)
        self.baseline = ""  # the experiment's baseline side (by preflight), which measure.size diffs against
        self.sizes: dict[str, dict] | None = None  # side -> {"size": ...} once diffed (measure.size)
        self.say = print  # one line for the user (prepare's)

    def preflight(self, exp: Experiment, variants: tuple[Variant, ...]) -> None:
        """The kernel sides' pre-flight (``perfab.kernel.preflight``) and what needs TCG, before anything is stored,
        built or booted; boot folders a killed launcher left are removed first."""
        from perfab import scratch
        from perfab.kernel import preflight, qemu

        scratch.sweep()
        problem = self.needs_plugin(exp)
        if problem and self.measure.accel == "kvm":
            raise UsageError(f'{exp.path}: {problem} needs perfab\'s TCG plugin, which does not run under KVM; set '
                             '[measure] accel = "tcg" (or "auto", which then emulates)')
        accel = "kvm" if self.measure.accel == "kvm" else "tcg"  # TCG adds options: the longest line
        self.baseline = exp.variants[0].name
        word = " " + longest_boot_word() if exp.perturb else ""  # the longest a boot's perturbation adds
        self.specs = preflight.check_sides(
            exp, variants, self.measure,
            lambda side: qemu.kernel_cmdline(qemu.BootRequest("", ("/",), cmdline=side + word,
                                                              randomized=exp.perturb), accel))

    def needs_plugin(self, exp: Experiment) -> str | None:
        """The key that asks for what only the TCG plugin counts (cache_sim, a declared count row), or None."""
        if self.measure.cache_sim:
            return "measure.cache_sim"
        counted = set(_COUNTS.values())
        for w in exp.workloads:
            for m in w.metrics:
                if m.name in counted:
                    return f"the metric {m.name!r} of workload {w.name!r}"
        return None

    def _spec(self, variant: Variant) -> Variant:
        """``variant`` with its kernel as the pre-flight expanded it."""
        return replace(variant, kernel=self.specs[variant.name]) if variant.name in self.specs else variant

    def prepare(self, variants: tuple[Variant, ...], say) -> None:
        """Each side's kernel image (built from source when asked), and the accelerator, before any run."""
        from perfab.kernel.sides import check_sides, choose_accel, resolve_kernel

        variants = tuple(self._spec(v) for v in variants)
        self.say = say
        check_sides(variants, self.cache_root, say)
        for v in variants:
            self.kernels[v.name] = resolve_kernel(v, self.cache_root, say)
            if v.kernel.image is None:
                self._check_built(v.name)
        first = self.kernels[variants[0].name] if variants else None
        plugin = "measure.cache_sim" if self.measure.cache_sim else None
        self.accel = choose_accel(self.measure.accel, say, first, self.cache_root, plugin)
        if self.counters and self.accel != "kvm":
            raise UsageError(f"guest_counters are counted by the guest's vPMU, which only KVM gives it, and the "
                             f"guests run under {self.accel.upper()} (no PMU: every row would be <not supported>); "
                             'set accel = "kvm" on a machine where KVM works, or remove guest_counters')
        if self.counters and first is not None:
            from perfab.run.backends import vpmu

            problem = vpmu.probe(first.image, self.counters, "kvm", str(Path(self.cache_root, "guest").resolve()))
            if problem:
                raise UsageError(problem)

    def _check_built(self, side: str) -> None:
        """A built kernel's memory need, known once it is built (a prebuilt one's is checked by the pre-flight)."""
        from perfab.kernel.image import describe
        from perfab.kernel.preflight import check_files, check_memory

        check_memory(describe(self.kernels[side].image), self.measure.memory_mb,
                     check_files(self.measure.files, self.measure.memory_mb), side)

    def side_sources(self) -> dict[str, dict]:
        """Each prepared side's booted kernel (``KernelImage.identity``), stored with the session's sources; before
        ``prepare``, the prebuilt images the pre-flight checked (a built kernel is known once built)."""
        from perfab.kernel.sides import KernelImage

        if self.kernels:
            out = {side: {"kernel": kernel.identity(), "guest_start": self.start()} for side, kernel in
                   self.kernels.items()}
            for side, facts in self._sizes().items():
                out[side].update(facts)
            return out
        return {side: {"kernel": KernelImage(Path(k.image), None, Path(k.image).name, cmdline=k.cmdline).identity()}
                for side, k in self.specs.items() if k.image is not None}

    def _sizes(self) -> dict[str, dict]:
        """``measure.size``: each side's vmlinux against the baseline's, diffed once (``perfab.kernel.sizes``)."""
        from perfab.kernel.sizes import side_sizes

        if self.measure.size and self.sizes is None:
            self.sizes = side_sizes(self.kernels, self.baseline, self.say)
        return self.sizes or {}

    def start(self) -> str:
        """How this backend's guests start, stored with each side: ``snapshot`` (from the side's saved guest) or
        ``boot`` and why (the accelerator chosen by ``prepare``, else the one asked for)."""
        from perfab.kernel.snapshot import problem

        if not self.snapshot:
            return "boot (measure.snapshot = false)"
        why = problem(self.accel or ("kvm" if self.measure.accel == "kvm" else "tcg"), True)
        return f"boot ({why})" if why else "snapshot"

    def replication(self, exp: Experiment, seed: int):
        """Boots as the unit where runs go on from saved guests (``measure.boots`` per side and workload), else the
        run (each boots); every boot and run perturbed, seeded (``perfab.replication``), unless
        ``experiment.perturb`` is false."""
        from perfab.replication import BOOT, GUEST_PERTURBATIONS, RUN, Replication

        if not exp.perturb:
            return Replication(RUN, 1, 0)  # nothing drawn: no seed to keep
        if self.start() == "snapshot":  # a run per boot at most: a boot without a run is no sample
            return Replication(BOOT, min(self.measure.boots, exp.runs), seed, GUEST_PERTURBATIONS)
        return Replication(RUN, 1, seed, GUEST_PERTURBATIONS)

    def plan_lines(self, variants: tuple[Variant, ...]) -> list[str]:
        """Each side's kernel (built before, or to build) and its boots, for ``perfab plan``."""
        from perfab.kernel.sides import plan_lines

        start = self.start()
        boots = "one boot" if self.measure.boots == 1 else f"{self.measure.boots} boots"
        how = f"one boot per run, {start.removeprefix('boot (')[:-1]}" if start != "snapshot" else \
            f"{boots} per side to just before the workload, each saved there, and every run starts from one of " \
            f"those states{' (under TCG; under KVM one boot per run)' if self.measure.accel == 'auto' else ''}"
        lines = plan_lines(tuple(self._spec(v) for v in variants), self.measure, self.cache_root, how)
        if self.measure.size and len(variants) > 1:
            lines.append(f"  size: perfab size on each side's vmlinux against {variants[0].name}'s when the session "
                         "begins; stored with it, printed in the report")
        return lines

    def for_side(self, variant: Variant, workload: Workload) -> "GuestSide":
        """This backend bound to ``variant``'s prepared kernel and ``workload``'s deadline."""
        if variant.name not in self.kernels:
            raise UsageError(f"side {variant.name!r} has no prepared kernel; this is a bug in the caller: "
                             "call prepare() with every side first")
        return GuestSide(self, variant, workload, guest_deadline(workload.timeout_s))

    def keep(self) -> int:
        """Saved guests the cache keeps: every boot of every side, as the session's runs go back to each."""
        from perfab.kernel.snapshot import KEEP

        return max(KEEP, 2 * len(self.kernels) * self.measure.boots)

    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The vPMU counter groups (one empty group without guest_counters)."""
        return self._groups

    def wrap(self, argv: list[str], scratch: Path, group: tuple[str, ...]) -> list[str]:
        raise UsageError("the guest backend measures a side at a time: use for_side(variant, workload).wrap")

    def collect(self, scratch: Path, group: tuple[str, ...], status: int) -> Measurement:
        """The launcher's result; a launcher killed before it wrote one says why (its last stderr line, its signal),
        and the boot folder it could not remove is removed now."""
        from perfab import scratch as folders

        folders.sweep()
        return read_result(Path(scratch) / RESULT, self.measure.interrupts, self.measure.vmstat,
                           launcher_exit(Path(scratch) / LAUNCHER_STDERR, status))

    def metric_info(self) -> dict[str, Metric]:
        branches = (f"{base}:{p}" for base in _BRANCHES for p in _PRIV.values()) if self.measure.branch_sim else ()
        names = (*_COUNTS.values(), "I1 MPKI:u", "I1 MPKI:k", *branches, *GUEST_CLOCKS,
                 *(f"interrupts.{r}" for r in self.measure.interrupts),
                 *(f"vmstat.{r}" for r in self.measure.vmstat))
        counted = {name: resolve(name) for name in self.counters}  # the vPMU's: the hardware's counts
        return {**{name: resolve(name, simulated=True, origin="backend") for name in names}, **counted}

    def service_counter(self, group: tuple[str, ...], scratch: Path, pids: list[int], cpus: str | None):
        """Nothing on this machine: the server runs in the guest, pinned to ``service.cpus``, and the
        launcher's per-vCPU counts say what those vCPUs ran (``GuestSide.collect``)."""
        return None

    def plugin_options(self) -> dict | None:
        """What the TCG plugin is asked to count (None under KVM, where no plugin runs)."""
        if self.accel != "tcg":
            return None
        models = {"branch": self.measure.branch_sim, "coherence": self.measure.coherence}
        levels = {key: getattr(self.measure, key) or DEFAULT_GEOMETRY[key] for key in DEFAULT_GEOMETRY}
        if not self.measure.cache_sim:
            return {"cache": False, "l1d": _plugin_geometry("l1d", DEFAULT_GEOMETRY["l1d"]), **models}
        return {"cache": True, **{key: _plugin_geometry(key, text) for key, text in levels.items()}, **models}


def vpmu_groups(counters: tuple[str, ...], budget: int | None) -> tuple[tuple[str, ...], ...]:
    """The vPMU's counter groups: within ``budget``, else within the host's usable counters (KVM gives the guest
    the host's, less those the host itself holds); one group when neither is known."""
    from perfab.run.backends.perfsched import check_events, schedule_groups

    check_events(list(counters))
    if budget is None:
        from perfab.run.backends.perfprobe import probe_counter_budget

        budget = probe_counter_budget().usable_counters
    return schedule_groups(list(counters), budget) if budget else (tuple(counters),)


def _plugin_geometry(key: str, text: str) -> str:
    """``"32K,8,64"`` (the spec's, cachegrind's) as the plugin's ``"32768:8:64"`` (bytes:ways:bytes)."""
    level = parse_level(key, text)
    return f"{level.size_bytes}:{level.assoc}:{level.line_bytes}"


def guest_deadline(timeout_s: float) -> float:
    """The launcher's deadline for a guest: inside the run's own timeout, so a hung guest fails with its
    console's tail before the runner kills the launcher (which leaves no result)."""
    return max(timeout_s * 0.9, timeout_s - 10.0)


class GuestSide(Declares, declaration=GUEST):
    """The guest backend bound to one side: its kernel and command line go into each run's request."""

    stderr_file = LAUNCHER_STDERR  # a launcher that left no result says why on its stderr

    def __init__(self, parent: GuestBackend, variant: Variant, workload: Workload, deadline_s: float,
                 values: dict[str, str] | None = None, service: dict | None = None, draw=None):
        self.parent, self.variant, self.workload, self.deadline_s = parent, variant, workload, deadline_s
        self.values = values or {}  # the run's placeholder values
        self.service = service  # the workload's server for this side and point, expanded; None: no server
        self.draw = draw  # the run's perturbation (perfab.replication.Draw); None: none

    def for_run(self, values: dict[str, str], service: dict | None, draw=None) -> "GuestSide":
        """This side bound to one run's placeholder values, the server started beside it and its perturbation."""
        return GuestSide(self.parent, self.variant, self.workload, self.deadline_s, values, service, draw)

    def groups(self) -> tuple[tuple[str, ...], ...]:
        return self.parent.groups()

    def wrap(self, argv: list[str], scratch: Path, group: tuple[str, ...]) -> list[str]:
        """Write the run's request beside its scratch files; the launcher is what the runner executes."""
        request = Path(scratch) / REQUEST
        request.write_text(json.dumps(self.request(argv, Path(scratch) / RESULT, group)))
        return [sys.executable, "-m", "perfab.kernel.launch", str(request)]

    def request(self, argv: list[str], result: Path, group: tuple[str, ...] = ()) -> dict:
        """The launcher's request for one run of ``argv`` on this side (inside ``perf stat`` with ``group``
        when the vPMU counts)."""
        from perfab.kernel.sides import launch_request

        doc = launch_request(self.parent.kernels[self.variant.name], self.variant, self.parent.measure,
                             self.parent.accel, self.parent.plugin_options(), argv, result, self.deadline_s,
                             self.parent.cache_root)
        doc["root"] = self.parent.measure.root
        doc["snapshot"] = self.parent.snapshot
        doc["keep"] = self.parent.keep()
        if self.draw is not None:
            doc.update(perturbed(doc, self.draw))
        doc["cwd"] = expand(self.workload.cwd, self.values) if self.workload.cwd else os.getcwd()
        doc["maps"] = side_maps(self.variant, self.workload, self.values, argv)
        if self.service is not None:
            doc["service"] = self.service
        if self.parent.counters:
            from perfab.run.backends import vpmu

            doc.update(argv=vpmu.wrap(list(argv), group), files=[*doc["files"], vpmu.PERF],
                       cmdline=vpmu.cmdline(doc["cmdline"]))
        return doc

    def collect(self, scratch: Path, group: tuple[str, ...], status: int) -> Measurement:
        """The launcher's result, with the guest perf's counts (guest_counters), and with a server pinned to vCPUs
        (``service.cpus``) what those vCPUs ran."""
        got = self._counted(self.parent.collect(scratch, group, status), scratch, group)
        cpus = checks.cpu_list((self.service or {}).get("cpus") or "")
        if not cpus or got.failure or not got.service:
            return got
        try:
            per_vcpu = json.loads((Path(scratch) / RESULT).read_text()).get("per_vcpu") or []
        except (OSError, ValueError):
            return got
        counts, excluded = {}, {}
        for priv, p in (("user", "u"), ("kernel", "k")):
            read = [v.get(f"insns_{priv}") for i, v in enumerate(per_vcpu) if i in cpus]
            if len(read) == len(cpus) and all(isinstance(x, (int, float)) for x in read):
                counts[f"service.instructions:{p}"] = float(sum(read))
            else:  # a vCPU the server was pinned to has no count: no reading, never a 0
                excluded[f"service.instructions:{p}"] = "not read: the guest gave no count for a vCPU the server ran on"
        return replace(got, service={**got.service, "counts": counts}, excluded={**got.excluded, **excluded})

    def _counted(self, got: Measurement, scratch: Path, group: tuple[str, ...]) -> Measurement:
        """``got`` with the vPMU's counts the guest perf printed at the end of the launcher's stderr."""
        if not self.parent.counters or got.failure:
            return got
        from perfab.run.backends import vpmu

        counted = vpmu.read((Path(scratch) / LAUNCHER_STDERR).read_text(errors="replace"), group)
        return replace(got, metrics={**got.metrics, **counted.metrics}, excluded={**got.excluded, **counted.excluded},
                       notes=(*got.notes, *counted.notes), failure=counted.failure, rusage=counted.rusage,
                       transient=counted.transient)

    def metric_info(self) -> dict[str, Metric]:
        return self.parent.metric_info()



def perturbed(doc: dict, draw) -> dict:
    """The request keys a run's perturbation sets (``perfab.replication``): its boot's word after the side's command
    line (so each boot is a saved guest of its own), the guest's randomisation on, the run's entropy and spin, and
    its environment pad."""
    from perfab.run.layout import PAD_VAR

    env = dict(doc["env"])
    env[PAD_VAR] = env.get(PAD_VAR, "") + "." * draw.run.pad
    return {"cmdline": " ".join(p for p in (doc["cmdline"], draw.word) if p), "randomized": True,
            "entropy": draw.run.entropy.hex(), "spin": draw.run.spin, "env": env}


SIDE_DIRS = (("build", "/perfab/build"), ("src", "/perfab/src"))  # a side's build placeholders -> guest paths
SIDE_PROGRAM_DIR = "/perfab/side"  # the directory of a program whose path names the side in another way


def side_maps(variant: Variant, workload: Workload, values: dict[str, str], argv: list[str]) -> list[list[str]]:
    """Host directories that differ by side, each shown at one guest path for every side.

    ``{build}`` and ``{src}`` are shown at ``/perfab/build`` and ``/perfab/src``; a program whose path
    names its side otherwise (``./build/{variant}/prog``, a side's ``vars``) has its directory shown at
    ``/perfab/side``.  So the workload runs from paths of the same bytes on every side, and its
    arguments, environment and stack start alike (see "Memory layout is not a change" in the README)."""
    maps = [[os.path.abspath(values[name]), guest] for name, guest in SIDE_DIRS
            if values.get(name) and os.path.isdir(values[name])]
    side_names = {"variant", *variant.vars}
    template = workload.argv[0] if workload.argv else ""
    program = argv[0] if argv else ""
    if any(f"{{{name}}}" in template for name in side_names) and "/" in program:
        directory = os.path.dirname(os.path.abspath(program))
        if not any(directory == m[0] or directory.startswith(m[0] + "/") for m in maps):
            maps.append([directory, SIDE_PROGRAM_DIR])
    return maps


def launcher_exit(stderr: Path, status: int) -> str:
    """How the launcher ended, for a run it left no result of: its own last error line, else its signal or code."""
    try:
        lines = [ln.strip() for ln in stderr.read_bytes().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    own = [ln for ln in lines if ln.startswith("perfab.kernel.launch:")]
    if own or lines:
        return (own or lines)[-1][:300]
    if os.WIFSIGNALED(status):
        return f"the launcher was killed by {signal.Signals(os.WTERMSIG(status)).name} (the run's timeout or a stop)"
    return f"the launcher exited with status {os.WEXITSTATUS(status)} and printed nothing"


def read_result(path: Path, interrupts: tuple[str, ...] = (), vmstat: tuple[str, ...] = (),
                launcher: str = "see the run's stderr") -> Measurement:
    """The launcher's result file as a measurement; no file means the launcher itself failed (``launcher``: how)."""
    try:
        result = json.loads(path.read_text())
    except FileNotFoundError:
        return Measurement({}, failure=f"the guest launcher left no result: {launcher}")
    except (OSError, ValueError) as e:
        return Measurement({}, failure=f"the guest launcher's result is unreadable ({e})")
    accel = result.get("accel") or "?"
    seen = result.get("vcpus_seen") or "?"
    notes = [f"guest: {accel.upper()}, {seen} vCPU{'' if seen == 1 else 's'} "
             f"seen, {_started(result)} and {POWERED_OFF} {result.get('host_wall_s') or 0:.1f} s"]
    if result.get("failure"):
        tail = " | ".join(str(result.get("console_tail") or "").strip().splitlines()[-3:])
        return Measurement({}, notes=tuple(notes), failure=f"{result['failure']}; console: {tail}"[:600])
    if accel == "tcg":
        notes.append(SIMULATION_NOTE)
    missing = missing_rows(result, interrupts, vmstat)
    if missing:
        return Measurement({}, notes=tuple(notes), failure=missing)
    counts = result.get("counts") or {}
    return Measurement(_metrics(result, accel, interrupts, vmstat), notes=tuple(notes),
                       profile={**_profile(result.get("symbols") or {}, counts.get("insns_kernel") or 0),
                                **_model_profile(result)},
                       service=result.get("service") or {})


def _started(result: dict) -> str:
    """How the run's guest began, for its note: booted, booted and saved, or restored (perfab.kernel.snapshot)."""
    start, key, note = result.get("start") or "booted", (result.get("snapshot") or "")[:12], result.get("snapshot_note")
    if start == "restored":
        return f"{RESTORED_NOTE} {key}"
    if start == "saved":
        return f"booted, {SAVED_NOTE} ({key}{'; ' + note if note else ''})"
    return f"booted (not saved: {note})" if note else "booted"


def missing_rows(result: dict, interrupts: tuple[str, ...], vmstat: tuple[str, ...]) -> str | None:
    """Why a run cannot count an asked-for row: the guest's /proc file has no such row (never a zero)."""
    deltas = result.get("deltas") or {}
    for rows, prefix, where, key in ((interrupts, "irq", "/proc/interrupts", "interrupts"),
                                     (vmstat, "vmstat", "/proc/vmstat", "vmstat")):
        for row in rows:
            if f"{prefix}.{row}" not in deltas:
                return (f"the guest's {where} has no row {row!r} (this kernel does not count it); remove it from "
                        f"measure.{key} or name a row the guest kernel has")
    return None


def _metrics(result: dict, accel: str, interrupts: tuple[str, ...], vmstat: tuple[str, ...]) -> dict[str, float]:
    """Counts, wall time and the asked-for in-guest counter deltas of one run."""
    counts = result.get("counts") or {}
    metrics = {_COUNTS[k]: float(v) for k, v in counts.items() if k in _COUNTS}
    for mode in ("u", "k"):  # misses per thousand instructions of the same privilege, as seed 000's tables
        misses, insns = metrics.get(f"I1 misses:{mode}"), metrics.get(f"instructions:{mode}")
        if misses is not None and insns:
            metrics[f"I1 MPKI:{mode}"] = 1000.0 * misses / insns
    for priv, p in _PRIV.items():
        if f"bc_{priv}" in counts:  # the branch model ran
            metrics.update({f"{base}:{p}": float(sum(counts[f"{e}_{priv}"] for e in events))
                            for base, events in _BRANCHES.items()})
    wall = result.get("guest_wall_s")
    if wall is not None:
        metrics["emulated_wall_s" if accel == "tcg" else "guest_wall_s"] = float(wall)
    deltas = result.get("deltas") or {}
    metrics.update({f"interrupts.{r}": float(deltas[f"irq.{r}"]) for r in interrupts})
    metrics.update({f"vmstat.{r}": float(deltas[f"vmstat.{r}"]) for r in vmstat})
    return metrics


def _profile(symbols: dict, kernel_insns: float) -> dict[str, float]:
    """The top kernel symbols by instructions, each as percent of the window's kernel instructions."""
    if not kernel_insns:
        return {}
    return {f"[k] {name}": 100.0 * insns / kernel_insns for name, insns, *_ in symbols.get("by_insns", [])}


def _model_profile(result: dict) -> dict[str, float]:
    """Each kernel symbol's share of the branch mispredictions and of HITM:k, and each data line's share of all
    HITM, in percent (the models' rows of the run's profile)."""
    counts, symbols = result.get("counts") or {}, result.get("symbols") or {}
    misses = counts.get("bcm_kernel", 0) + counts.get("bim_kernel", 0)
    hitm_k = counts.get("hitm_kernel", 0)
    hitm = hitm_k + counts.get("hitm_user", 0)
    rows = [*((f"branch-miss% [k] {n}", bcm + bim, misses)
              for n, _, bcm, _, bim in symbols.get("by_branch_misses", [])),
            *((f"HITM% [k] {n}", h, hitm_k) for n, h, _ in symbols.get("by_hitm", [])),
            *((f"HITM% line {d['line']}", d["hitm"], hitm) for d in result.get("hitm_lines") or [])]
    return {key: 100.0 * part / whole for key, part, whole in rows if part and whole}
