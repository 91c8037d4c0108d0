"""Stage 1: the experiment spec, read from TOML into typed, validated values.

A spec names the sides to compare (``[[variant]]``), what to run on each
(``[[workload]]``), how often and in which order (``[experiment]``) and how
each run is measured (``[measure]``).  Every key is checked against
``perfab.specfile.schema``: an unknown key, a wrong type, a value out of range
or a missing required key is a ``SpecError`` naming the file, the key and
the fix.  See ``examples/default.toml`` for a complete spec and the README
(generated from the schema) for every key.

The modules: ``schema`` (every key: kind, typed default, meaning; each
backend's own keys), ``kinds`` and ``checks`` (value checks), ``reader``
(a loop over the schema), ``rules`` (checks across keys), ``writer`` (an
experiment back as TOML: the source of ``Experiment.derive``) and
``stored`` (what the analysis and an older store ask of stored spec text).
The dataclasses below hold no defaults: the schema's apply.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfab.errors import SpecError


@dataclass(frozen=True)
class MetricSpec:
    """How one metric of a workload is labelled and judged."""

    name: str  # metric name as the parser or backend produces it
    unit: str | None  # overrides the parser's unit
    higher_is_better: bool | None  # None: keep the parser's / backend's direction
    margin_pct: float | None  # equivalence margin for `flat`; None: the experiment default
    primary: bool  # a `**` regression here fails `report --fail-on-regression`
    check: float | None  # a check metric must equal this in every run (shown `valid`)
    method: str | None  # statistical method override: nonparametric | exact | normal
    label: str | None  # row label in the report
    no_direction: bool  # direction = "none" was written: no side is better, whatever the parser says


@dataclass(frozen=True)
class Service:
    """A server started around each side's runs of a workload, and stopped by perfab, always."""

    argv: tuple[str, ...]  # the server command (placeholders expanded per side)
    port: int | None  # wait until 127.0.0.1:port accepts connections
    ready_timeout_s: float  # give up waiting after this long
    cwd: str | None  # working directory for the server
    log_dir: str  # where each start's output is kept
    requests_metric: str | None  # client metric counting requests, for server CPU per request
    counters: str | None  # perf backend: also count the server's "pids" or its "cpus"
    cpus: str | None  # the CPU list counted with counters = "cpus"


@dataclass(frozen=True)
class Workload:
    """One command run many times on every side."""

    name: str  # row-group name in the report
    argv: tuple[str, ...]  # the command; a single shell string when shell is true
    shell: bool  # run argv[0] with /bin/sh -c
    cwd: str | None  # working directory (placeholders allowed)
    timeout_s: float  # a run taking longer is killed and recorded as failed
    parser: str | None  # name of a perfab.parsers parser for the workload's output
    parser_options: dict[str, Any]  # options for that parser
    setup: tuple[str, ...]  # shell commands run once before this workload's runs
    teardown: tuple[str, ...]  # shell commands run once after, always
    service: Service | None  # a server the workload talks to
    metrics: tuple[MetricSpec, ...]  # declarations for the workload's metrics
    params: tuple[tuple[str, tuple[str, ...]], ...]  # sweep parameters and their values, in spec order


@dataclass(frozen=True)
class Kernel:
    """The Linux kernel a side boots under QEMU for each of its runs (``perfab.kernel``)."""

    image: str | None  # a prebuilt bzImage/vmlinuz; None: build one from source
    symbols: str | None  # System.map or vmlinux of the image (prebuilt: found beside it when None)
    cmdline: str  # kernel command line of the side (perfab adds the console and init)
    source: str | None  # source tree, tarball or git repository to build from; None: Debian's 6.1 tarball
    ref: str | None  # with a git repository as source: the ref to build
    base: str  # tinyconfig | defconfig | path of a .config
    config: tuple[tuple[str, str], ...]  # options set on top of the base, e.g. (("PARAVIRT_SPINLOCKS", "n"),)
    patches: tuple[str, ...]  # patch files applied to a private copy of the source
    boot: str  # qemu: a guest boots it per run | kexec: this machine kexecs into it per block of runs
    initrd: str | None  # boot = "kexec": initramfs loaded with the image; None: initrd.img-VERSION beside it
    boot_timeout_s: float  # boot = "kexec": seconds the kernel has to boot before the side fails


@dataclass(frozen=True)
class Variant:
    """One side of the comparison."""

    name: str  # side name, usable as {variant} in commands
    env: dict[str, str]  # extra environment for this side's runs
    wrap: tuple[str, ...]  # argv prefix, e.g. ("taskset", "-c", "1")
    vars: dict[str, str]  # extra placeholders, e.g. {bin} -> ./build/inline
    setup: tuple[str, ...]  # shell commands run when the runner switches to this side
    teardown: tuple[str, ...]  # shell commands run when it switches away, always
    external: bool  # the side cannot be switched within a session (e.g. a booted kernel)
    detect: str | None  # shell command whose output identifies the current external side
    detect_pattern: str | None  # regex matched against detect's output
    git: str | None  # build this side from this commit of experiment.repo
    build: tuple[str, ...]  # build command of this side (argv; one string runs with /bin/sh -c)
    kernel: Kernel | None  # the kernel this side boots for its runs; None: runs on this machine


@dataclass(frozen=True)
class Measure:
    """How each run is measured."""

    backend: str  # time | perf | cachegrind
    counters: tuple[str, ...]  # perf events, e.g. ("cycles", "L1-icache-load-misses:k")
    max_events_per_run: int | None  # PMU counter budget; None: probe it
    l1i: str | None  # cachegrind geometry "size,assoc,line", None: the host's
    l1d: str | None  # cachegrind D1 geometry
    ll: str | None  # cachegrind last-level geometry
    callgrind_toggle: str | None  # measure only this function (callgrind --toggle-collect)
    profile: bool  # also sample every run with perf record and compare per-symbol self time
    profile_event: str | None  # event to sample; None: cycles with a PMU, cpu-clock without
    profile_freq: int  # samples per second
    branch_sim: bool  # cachegrind: simulate branch predictors
    interrupts: tuple[str, ...]  # /proc/interrupts rows counted over each run (machine-wide)
    vcpus: int  # guest backend: virtual CPUs of each side's guest
    memory_mb: int  # guest backend: guest memory
    accel: str  # guest backend: auto (KVM when a probe boots, else TCG) | tcg | kvm
    files: tuple[str, ...]  # guest backend: host files copied into the guest at the same path
    vmstat: tuple[str, ...]  # guest backend: /proc/vmstat rows counted over each run, in the guest
    cache_sim: bool  # guest backend: simulate L1i/L1d/LL in the TCG plugin
    root: str  # guest backend: what the guest runs from: "initramfs" (files copied in) or "host" (this machine's /)
    snapshot: bool  # guest backend under TCG: runs start from the side's guest saved just before the workload
    boots: int  # guest backend under TCG with snapshot: boots per side and workload, the unit of replication
    coherence: bool  # guest backend: private L1d per vCPU with MESI in the TCG plugin (HITM, invalidations)
    guest_counters: tuple[str, ...]  # guest backend under KVM: perf events counted inside the guest (vPMU)
    size: bool  # guest backend, built kernels: each side's vmlinux diffed against the baseline's (perfab size)
    options: dict[str, Any]  # keys a backend declares (its measure_keys) that have no field here


@dataclass(frozen=True)
class Sequential:
    """``runs = "auto"``: a group-sequential experiment that stops when its rows are decided."""

    min_runs: int  # runs per side before the first look
    max_runs: int  # runs per side at the last look
    stop_on: str  # primary | all
    spending: str  # pocock | obrien-fleming | linear


@dataclass(frozen=True)
class Experiment:
    """A whole validated spec."""

    name: str  # experiment name; the key in the results database
    runs: int  # measured runs per side and workload
    warmup: int  # unmeasured runs per side and workload, before the measured ones
    order: str  # interleaved | alternate | sequential | random
    seed: int  # seed of the randomized order
    pin: str | None  # CPU list for the workload, e.g. "2" or "0-1"
    max_failures: int | None  # abort when more runs than this fail; None: a quarter of the plan
    stdout_cap_bytes: int  # keep this much of each run's stdout and stderr verbatim
    alpha: float  # false discovery rate target for `**`
    confidence: float  # confidence level of the reported intervals
    fdr: str  # bh | holm
    margin_pct: float  # default equivalence margin for `flat`, in percent
    method: str  # default statistical method
    baseline: str  # name of the baseline variant
    variants: tuple[Variant, ...]  # two or more sides
    workloads: tuple[Workload, ...]  # one or more workloads
    measure: Measure  # how runs are measured
    source: str  # the spec's text, stored with every session
    path: str  # where the spec was read from
    build: tuple[str, ...]  # build command for every side without its own ({variant} placeholder)
    repo: str | None  # the git repository variant.git refs name; None: the one holding the spec
    build_timeout_s: float  # a build taking longer fails
    sequential: Sequential | None  # runs = "auto": look after every block, stop when decided
    layout: str  # equal: argv/environment padded alike on every side | random: plus 0..4095 bytes per run
    layout_check: bool  # also run the pair with functions aligned to 64 bytes, as experiment NAME+align64
    perturb: bool  # seeded perturbation of what a deterministic backend repeats (perfab.replication)
    layout_builds: int  # builds per side perfab builds, each with a seeded code offset: the unit of replication
    perturb_seed: int | None  # the perturbations' seed; None: drawn when a session begins

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise SpecError(f"{self.path}: no variant named {name!r}; known: {', '.join(v.name for v in self.variants)}")

    def workload(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        raise SpecError(f"{self.path}: no workload named {name!r}; known: {', '.join(w.name for w in self.workloads)}")

    @property
    def design(self) -> dict[str, Any]:
        """What a session stores of how it was planned, so resuming and comparing it need no spec text: runs per
        side, warm-up, order, seed, the sequential design (None for a fixed number of runs), and each
        workload's definition digest and parser."""
        from perfab.specfile.stored import workload_definitions

        seq = self.sequential
        return {"runs": self.runs, "warmup": self.warmup, "order": self.order, "seed": self.seed,
                "sequential": None if seq is None else {"min_runs": seq.min_runs, "max_runs": seq.max_runs,
                                                        "stop_on": seq.stop_on, "spending": seq.spending},
                "workloads": workload_definitions(self)}

    def derive(self, **changes: Any) -> "Experiment":
        """This experiment with ``changes`` (its fields, e.g. ``name=``, ``variants=``, ``path=``), checked across
        keys as a read spec is; its source is the spec written out, so a session stores what it ran.

        A baseline that is not among new ``variants`` becomes the first of them."""
        from perfab.specfile.reader import derived

        return derived(self, changes)

    @property
    def spec_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


def load_spec(path: str | Path) -> Experiment:
    """Read and validate a spec file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")  # UTF-8, with or without a byte-order mark
    except FileNotFoundError:
        raise SpecError(f"{p}: no such spec file; pass the path of an experiment TOML "
                        "(see examples/default.toml)") from None
    except IsADirectoryError:
        raise SpecError(f"{p}: is a directory; pass the path of an experiment TOML file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read the spec ({e.__class__.__name__}); check the path and that it is a "
                        "UTF-8 text file") from None
    return parse_spec(text, str(p))


def parse_spec(text: str, path: str = "<spec>") -> Experiment:
    """Validate spec text; ``path`` is used in error messages."""
    from perfab.specfile.reader import read

    return read(text, path)


ALIGNED_SUFFIX = "+align64"  # layout_check's aligned pair is stored as experiment NAME+align64
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FROM_SOURCE = ("src", "build")  # placeholders a side built from git has (perfab.run.build.Source.values)


def expand(template: str, values: dict[str, str], where: str = "command") -> str:
    """Replace ``{name}`` placeholders; ``{{`` and ``}}`` stay literal braces."""
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key in _FROM_SOURCE and key not in values:
            raise SpecError(f"{where}: {{{key}}} is defined only for a side built from git (variant.git = \"REF\" "
                            "with a build command); give this side a git ref, or write the path itself")
        if key not in values:
            raise SpecError(f"{where}: unknown placeholder {{{key}}}; known: "
                            f"{', '.join('{' + k + '}' for k in sorted(values))}")
        return values[key]

    parts = template.split("{{")
    return "{".join(_PLACEHOLDER.sub(sub, p).replace("}}", "}") for p in parts)


def placeholders(exp: Experiment, variant: Variant, workload: Workload,
                 params: tuple[tuple[str, str], ...] = (), source: dict[str, str] | None = None) -> dict[str, str]:
    """The values ``{variant}``, ``{workload}``, ``{experiment}``, the sweep point's, ``{src}``/``{build}`` of a
    side built from source, and the side's own vars."""
    values = {"variant": variant.name, "workload": workload.name, "experiment": exp.name}
    values.update(params)
    values.update(source or {})
    values.update(variant.vars)
    return values


def workload_placeholders(exp: Experiment, workload: Workload) -> dict[str, str]:
    """The values a workload's own setup and teardown may use: they run once, for every side."""
    return {"workload": workload.name, "experiment": exp.name}
