"""Every key a spec may hold, with its kind, typed default and meaning: one source of truth.

The reader (``perfab.specfile.reader``) is a loop over these tables: it accepts
exactly these keys, checks each value with its kind, and fills an absent
key with its default.  The README's spec reference is generated from them
(``python -m perfab.reference``), so the documentation cannot drift from
what is accepted.  The keys of ``[measure]`` that one backend reads are
declared by that backend (``perfab.specfile.backends``): another backend
refuses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfab.methodtraits import DEFAULT as DEFAULT_METHOD
from perfab.methodtraits import spec_names
from perfab.specfile import checks
from perfab.specfile.backends import DECLARATIONS, DEFAULT, backend_that
from perfab.specfile.checks import MAX_SWEEP_POINTS  # noqa: F401 (the limit lives beside the check)
from perfab.specfile.kinds import (AnyTable, Bool, Choice, CpuList, Integer, Kind, Name, Number, Pairs, Probability,
                               StrMap, Strings, Sub, Subs, Text)
from perfab.specfile.keys import REQUIRED, BackendKeys, Key, render  # noqa: F401 (the schema's own types)

ORDERS = ("interleaved", "alternate", "sequential", "random")
KERNEL_BASES = ("tinyconfig", "defconfig")
KERNEL_BOOTS = ("qemu", "kexec")
LAYOUTS = ("equal", "random")
FDR_METHODS = ("bh", "holm")
METHODS = spec_names()  # the statistical methods a spec may choose, as ``perfab.methodtraits`` declares them
SPENDING = ("pocock", "obrien-fleming", "linear")  # error-spending functions (perfab.analyse.spending)
DIRECTIONS = ("higher", "lower", "none")
STOP_ON = ("primary", "all")
SERVICE_COUNTERS = ("pids", "cpus")

LAYOUT_BUILDS = 6  # layout builds per side by default where a deterministic simulator repeats one placement
MAX_RUNS = 10_000  # measured runs per cell
MAX_WARMUP = 1_000  # warm-up runs per cell
MAX_PLAN = 200_000  # runs in one session's plan
WEEK_S = 7 * 86400  # the longest timeout a run or build may have


def _k(name: str, value: Kind, default: Any, doc: str, shown: str | None = None, field: str | None = None) -> Key:
    return Key(name, value, default, doc, shown, field)


RUNS = checks.Runs(Integer(1, MAX_RUNS))
ALPHA, CONFIDENCE = 0.05, 0.95  # the defaults of experiment.alpha and experiment.confidence
_LEVELS = Probability(f"alpha = {ALPHA}, confidence = {CONFIDENCE}")
_ANY_STRINGS = Strings(words="array of strings, or a string")

EXPERIMENT = (
    _k("name", Name(), REQUIRED, "Experiment name: the key of its runs in the results database."),
    _k("runs", RUNS, 20,
       f'Measured runs per side (and sweep point) and workload, 1..{MAX_RUNS}; "auto": sequential, stop when '
       "decided (min_runs..max_runs)."),
    _k("min_runs", Integer(2, MAX_RUNS), 6, 'With runs = "auto": runs per side before the first look.'),
    _k("max_runs", Integer(2, MAX_RUNS), 40, 'With runs = "auto": runs per side at the last look.'),
    _k("stop_on", Choice(STOP_ON), "primary",
       'With runs = "auto": the rows that must be decided to stop: primary (every row when none is) or all.'),
    _k("spending", Choice(SPENDING), "pocock",
       'With runs = "auto": error-spending function of the group-sequential design: pocock, obrien-fleming, '
       "linear."),
    _k("warmup", Integer(0, MAX_WARMUP), 1,
       f"Unmeasured runs per side and workload before the measured ones, 0..{MAX_WARMUP}."),
    _k("order", Choice(ORDERS), "interleaved", f"Run order: {', '.join(ORDERS)}."),
    _k("seed", Integer(-(2 ** 63), 2 ** 63 - 1), 1, "Seed of the randomized order."),
    _k("pin", CpuList(), None, 'CPUs the workload runs on, e.g. "1" or "0-1,3" (sched_setaffinity).'),
    _k("max_failures", Integer(0, MAX_PLAN), None,
       "Abort the session when more measured runs than this fail. Unset, a session also stops once the "
       "first 3 runs of a sweep point all fail to parse.", "a quarter of the plan, at least 3"),
    _k("stdout_cap", Integer(0, 1 << 30), 65536,
       "Bytes of each run's stdout and stderr kept verbatim; a parsed output longer than this fails the run "
       "(raise it).", field="stdout_cap_bytes"),
    _k("alpha", _LEVELS, ALPHA,
       "False discovery rate (or family-wise error with holm) for `**`."),
    _k("confidence", _LEVELS, CONFIDENCE,
       "Confidence level of the reported intervals."),
    _k("fdr", Choice(FDR_METHODS), "bh",
       "Multiplicity control across a report's rows: bh (Benjamini-Hochberg) or holm."),
    _k("margin", Number(0, 1000), 0.1, "Percent: a change shown to lie within +-margin is `flat`.",
       field="margin_pct"),
    _k("method", Choice(METHODS), DEFAULT_METHOD, f"Default statistical method: {', '.join(METHODS)}."),
    _k("baseline", Text(), None, "Name of the baseline variant.", "the first variant"),
    _k("build", _ANY_STRINGS, (),
       "Build command for every side without its own (argv, with {variant}; one string runs with /bin/sh -c); "
       "run once per session before any run."),
    _k("repo", Text(), None, "Git repository that variant.git refs name.", "the repository holding the spec"),
    _k("build_timeout", Number(0, WEEK_S), 3600.0, "Seconds a side's build may take.", field="build_timeout_s"),
    _k("layout", Choice(LAYOUTS), "equal",
       "Argv and environment padding of each run: equal (the same bytes on every side) or random (equal, plus "
       "0..4095 bytes drawn per run from the seed: the stack starts at a different offset every run)."),
    _k("perturb", Bool(), True,
       "Perturb what a deterministic backend would repeat exactly, seeded and alike on every side: under "
       "cachegrind each run's stack offset; in a guest each boot's kernel command line (a no-op word) and each "
       "run's random pool, timer phase and stack offset. false: every run of a side repeats one draw, and the "
       "report says its verdicts are per run."),
    _k("perturb_seed", Integer(0, 2 ** 31 - 1), None,
       "Seed of the perturbations (stored with the session; the same seed makes the same perturbations).",
       "drawn when a session begins"),
    _k("layout_builds", Integer(1, 64), None,
       "Sides perfab builds ({layout_cflags} in their build command) are built this many times each, every build "
       "with its code, read-only data and data moved by a seeded pad linked in first (the same pads on every side); "
       "the runs are spread over the builds (a build per run when runs are fewer) and verdicts take the build as "
       "the unit: a change that is a code-placement accident shows as spread between builds.",
       f"{LAYOUT_BUILDS} under cachegrind when every side is built with {{layout_cflags}}, else 1"),
    _k("layout_check", Bool(), False,
       "Also run a second pair with every function aligned to 64 bytes (kernel sides built from source: "
       "DEBUG_FORCE_FUNCTION_ALIGN_64B; sides built by perfab: {layout_cflags} = -falign-functions=64) and "
       "random padding, as experiment NAME+align64; a `**` row that vanishes or flips there is layout-sensitive."),
)

VARIANT = (
    _k("name", Name(), REQUIRED, "Side name, usable as {variant} in commands."),
    _k("env", StrMap(checks.env_name), {}, "Extra environment of this side's runs, setup and services."),
    _k("wrap", Strings(), (), 'Command prefix for this side\'s runs, e.g. ["taskset", "-c", "1"].'),
    _k("vars", StrMap(checks.placeholder_name), {},
       "Extra placeholders for this side, e.g. {bin = \"./build/a\"} gives {bin}."),
    _k("setup", Strings(), (), "Shell commands run each time the runner switches to this side."),
    _k("teardown", Strings(), (), "Shell commands run each time it switches away, always."),
    _k("external", Bool(), False,
       "The side cannot be switched within a session (a booted kernel): one session per side."),
    _k("detect", Text(), None, "Shell command whose output tells which external side this machine is."),
    _k("detect_pattern", Text(checks.regex), None, "Regex matched against detect's output."),
    _k("git", Text(checks.git_ref), None,
       "Build this side from this commit (a ref), checked out in a cache keyed by commit and build command; "
       "gives {src} and {build}."),
    _k("build", _ANY_STRINGS, (),
       "This side's build command (argv; one string runs with /bin/sh -c), in {src}, once per session.",
       "experiment.build"),
    _k("kernel", Sub("variant.kernel"), None,
       lambda: 'The Linux kernel this side boots under QEMU for each run (see variant.kernel); needs backend = '
               f'"{backend_that("boots_kernels")}".'),
)

KERNEL = (
    _k("image", Text(), None,
       "A prebuilt kernel image (a bzImage, e.g. /boot/vmlinuz-6.1.0-...-amd64, or a vmlinux with a PVH note) to boot "
       "on this side; {variant}, {experiment} and the side's vars expand.",
       "none: build from source"),
    _k("symbols", Text(), None, "System.map or vmlinux of the image: names the kernel symbols counted (placeholders "
       "as for image).",
       "System.map-VERSION beside a /boot image"),
    _k("cmdline", Text(), "", "Kernel command line of this side (perfab adds console=ttyS0 and its init; the whole "
       "must fit the kernel's 2047 bytes; placeholders as for image)."),
    _k("source", Text(), None,
       "Kernel source tree, tarball or git repository to build from (out of tree, cached by source, resolved "
       "config, patches and compiler).", "/usr/src/linux-source-6.1.tar.xz (package linux-source-6.1)"),
    _k("ref", Text(), None, "With a git repository as source: the branch, tag or commit to build."),
    _k("base", Text(), "tinyconfig",
       f"Base config: {', '.join(KERNEL_BASES)} or the path of a .config (tinyconfig gets what the guest needs)."),
    _k("config", Pairs(checks.kconfig_name), (),
       'Options on top of the base, e.g. {PARAVIRT_SPINLOCKS = "n", NR_CPUS = "4"}; one that does not exist or '
       "that olddefconfig drops is refused before any build.", "{}"),
    _k("patches", Strings(), (), "Patch files applied (in order) to a private copy of the source."),
    _k("boot", Choice(KERNEL_BOOTS), "qemu",
       lambda: f'How the side\'s kernel runs: qemu (a guest booted for each run, backend = '
               f'"{backend_that("boots_kernels")}") or kexec (this machine kexecs into it and runs the side\'s runs '
               'with a host backend; see On a real machine).'),
    _k("initrd", Text(), None, 'With boot = "kexec": the initramfs loaded with the image.',
       "initrd.img-VERSION beside a /boot image"),
    _k("boot_timeout", Number(10, WEEK_S), 300.0,
       'With boot = "kexec": seconds the kernel has to boot; perfab adds panic= so one that panics is rebooted '
       "by the firmware into the default boot entry, and the side fails.", field="boot_timeout_s"),
)

WORKLOAD = (
    _k("name", Name(), REQUIRED, "Workload name: a row group in the report."),
    _k("argv", Strings(words="array of strings"), REQUIRED, "The command; a single string when shell = true."),
    _k("shell", Bool(), False, "Run argv (one string) with /bin/sh -c."),
    _k("cwd", Text(), None, "Working directory of the runs (placeholders allowed).", "perfab's working directory"),
    _k("timeout", Number(0.001, WEEK_S), 600.0, "Seconds; a run taking longer is killed and recorded as failed.",
       field="timeout_s"),
    _k("parser", Text(), None, "Parser of the workload's output (see Parsers)."),
    _k("parser_options", AnyTable(), {}, "Options of that parser, with their types under Parsers."),
    _k("setup", Strings(checks.workload_level), (),
       "Shell commands run once before this workload's runs ({workload} and {experiment} only)."),
    _k("teardown", Strings(checks.workload_level), (), "Shell commands run once after them, always."),
    _k("params", checks.PARAMS, (),
       'Sweep parameters, e.g. {threads = [1, 2, "100%"]} ("N%" of the online CPUs); each is a placeholder.', "{}"),
    _k("service", Sub("workload.service"), None,
       "A server the workload talks to, started per side (see workload.service)."),
    _k("metric", Subs("workload.metric", element=("expected a table", "write [[workload.metric]] tables")), (),
       "Declarations of the workload's metrics (see workload.metric).", field="metrics"),
)

SERVICE = (
    _k("argv", Strings(checks.program), REQUIRED,
       "The server command, with the side's placeholders; started on every switch to a side, stopped after."),
    _k("port", checks.Port(), None,
       "Wait until 127.0.0.1:port accepts connections; refused when something already listens there."),
    _k("ready_timeout", Number(0, 3600), 10.0, "Seconds to wait for the port.", field="ready_timeout_s"),
    _k("cwd", Text(), None, "Working directory of the server.", "perfab's working directory"),
    _k("log", Text(), ".perfab/logs", "Directory for the server's output (one file per start).", field="log_dir"),
    _k("requests", Text(), None,
       "Client metric counting requests (e.g. complete_requests): the server's CPU time is also given per request.",
       field="requests_metric"),
    _k("counters", Choice(SERVICE_COUNTERS, fix='use "pids" or "cpus"'), None,
       lambda: f'With the {backend_that("counts_service")} backend, also count the server: "pids" (perf stat -p on '
               'its processes) or "cpus" (perf stat -a -C service.cpus); metrics service.<event>.'),
    _k("cpus", CpuList((str,), "string"), None, 'The CPUs counted with counters = "cpus", e.g. "1".'),
)

METRIC = (
    _k("name", Text(), REQUIRED, "Metric name as the parser or backend produces it."),
    _k("label", Text(), None, "Row label in the report.", "the name"),
    _k("unit", Text(), None, "Unit shown with the values.", "the parser's"),
    _k("direction", Choice(DIRECTIONS, fix='use "higher", "lower" or "none"'), None,
       f"Which way is better: {', '.join(DIRECTIONS)}.", "the parser's"),
    _k("margin", Number(0, 1000), None, "Percent equivalence margin of this metric.", "experiment.margin",
       field="margin_pct"),
    _k("primary", Bool(), False, "A `**` regression here fails `report --fail-on-regression`."),
    _k("check", Number(None, None), None, "Every run must show exactly this value (e.g. 0 failed requests): `valid`."),
    _k("method", Choice(METHODS, "unknown method {!r}"), None,
       f"Statistical method of this metric: {', '.join(METHODS)}.", "experiment.method"),
)


def keys_by_backend() -> dict[str, BackendKeys]:
    """Each backend's own ``[measure]`` keys, by backend, as their declarations state them."""
    return {name: d.measure_keys for name, d in DECLARATIONS.items()}


def _backend_key() -> Key:
    """``[measure] backend``: its choices, default and meaning are the declarations'."""
    names = tuple(DECLARATIONS)
    return _k("backend", Choice(lambda: tuple(DECLARATIONS)), DEFAULT, f"How runs are measured: {', '.join(names)}.")


MEASURE_COMMON = (
    _k("max_events_per_run", Integer(1, 64), None,
       lambda: f"PMU counter budget per run ({backend_that('counts_service')} backend).", "probed"),
    _k("interrupts", Strings(checks.interrupt_rows), (),
       lambda: 'Rows of /proc/interrupts counted over each run, machine-wide (e.g. ["TLB", "CAL"]): '
               f"interrupts.TLB; with the {backend_that('boots_kernels')} backend, the guest's."),
    _k("profile", Bool(), False, "Also sample every run with perf record; per-symbol self-time diff."),
    _k("profile_event", Text(), None, "Event perf record samples.", "cycles, or cpu-clock without a PMU"),
    _k("profile_freq", Integer(1, 100_000), 999, "Samples per second."),
)


def owner(name: str) -> str | None:
    """The backend whose own ``[measure]`` key ``name`` is; None for a key every backend reads."""
    return next((b for b, entry in keys_by_backend().items() if any(k.name == name for k in entry.keys)), None)


_MEASURE: dict[tuple, tuple[Key, ...]] = {}  # the declarations and their keys -> [measure]'s keys


def _measure_keys() -> tuple[Key, ...]:
    """``[measure]``: the keys every backend reads, then each backend's own (built again when a declaration is
    added or changed)."""
    state = tuple(DECLARATIONS.values())
    if state not in _MEASURE:
        _MEASURE.clear()
        _MEASURE[state] = (_backend_key(), *MEASURE_COMMON,
                           *(k for entry in keys_by_backend().values() for k in entry.keys))
    return _MEASURE[state]


class _Tables(Mapping):
    """The keys of each spec table; ``[measure]``'s are asked of the backends at each use."""

    def __init__(self, fixed: dict[str, tuple[Key, ...]]):
        self._fixed = fixed  # every table but [measure], in README order

    def __getitem__(self, table: str) -> tuple[Key, ...]:
        return _measure_keys() if table == "measure" else self._fixed[table]

    def __iter__(self):
        return iter((*self._fixed, "measure"))

    def __len__(self) -> int:
        return len(self._fixed) + 1


TABLES: Mapping[str, tuple[Key, ...]] = _Tables({
    "experiment": EXPERIMENT,
    "variant": VARIANT,
    "variant.kernel": KERNEL,
    "workload": WORKLOAD,
    "workload.service": SERVICE,
    "workload.metric": METRIC,
})

# The document itself: its four tables, in the order they are read.
DOCUMENT = (
    _k("experiment", Sub("experiment"), REQUIRED, "The experiment's name, runs, order and statistics."),
    _k("variant", Subs("variant", empty=("need at least one [[variant]] table (two to compare)",
                                         "add a baseline and an experiment side")), REQUIRED,
       "The sides compared.", field="variants"),
    _k("workload", Subs("workload", empty=("need at least one [[workload]] table", "add the command to measure")),
       REQUIRED, "The commands run on every side.", field="workloads"),
    _k("measure", Sub("measure", not_table=("expected a table", "write [measure]")), {}, "How runs are measured."),
)
TOP_LEVEL = tuple(k.name for k in DOCUMENT)


def key(table: str, name: str) -> Key:
    """The key ``name`` of ``table``."""
    return next(k for k in TABLES[table] if k.name == name)


def default(table: str, name: str) -> Any:
    """The typed default of ``table.name``."""
    return key(table, name).default


def allowed(table: str) -> set[str]:
    return {k.name for k in TABLES[table]}


def required(table: str) -> set[str]:
    return {k.name for k in TABLES[table] if k.default is REQUIRED}


def reference_markdown() -> str:
    """The spec reference for the README: one table per spec table."""
    heads = {"experiment": "[experiment]", "variant": "[[variant]]", "workload": "[[workload]]",
             "variant.kernel": "[variant.kernel]", "workload.service": "[workload.service]",
             "workload.metric": "[[workload.metric]]", "measure": "[measure]"}
    out: list[str] = []
    for table in ("experiment", "variant", "variant.kernel", "workload", "workload.service", "workload.metric",
                  "measure"):
        out += [f"#### `{heads[table]}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| `{k.name}` | {k.kind} | {k.default_text().replace('|', '/')} | {k.text().replace('|', '/')} |"
                for k in TABLES[table]]
        out.append("")
    return "\n".join(out)
