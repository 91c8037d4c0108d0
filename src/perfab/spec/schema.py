"""Every key a spec may hold, with its type, default and meaning: one source of truth.

The reader (``perfab.spec.reader``) accepts exactly these keys, and the
README's spec reference is generated from them (``python -m perfab.spec``),
so the documentation cannot drift from what is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ORDERS = ("interleaved", "alternate", "sequential", "random")
ACCELS = ("auto", "tcg", "kvm")
KERNEL_BASES = ("tinyconfig", "defconfig")
FDR_METHODS = ("bh", "holm")
METHODS = ("nonparametric", "exact", "normal")
DIRECTIONS = ("higher", "lower", "none")

MAX_RUNS = 10_000  # measured runs per cell
MAX_WARMUP = 1_000  # warm-up runs per cell
MAX_PLAN = 200_000  # runs in one session's plan
MAX_SWEEP_POINTS = 1_000  # points of one workload's parameter grid


@dataclass(frozen=True)
class Key:
    """One key of a spec table."""

    name: str  # the key as written in TOML
    kind: str  # its TOML type, in words
    default: str  # what applies when it is absent ("required" for required keys)
    doc: str  # what it means, one or two sentences


def _k(name: str, kind: str, default: str, doc: str) -> Key:
    return Key(name, kind, default, doc)


TABLES: dict[str, tuple[Key, ...]] = {
    "experiment": (
        _k("name", "string", "required", "Experiment name: the key of its runs in the results database."),
        _k("runs", 'integer or "auto"', "20",
           f'Measured runs per side (and sweep point) and workload, 1..{MAX_RUNS}; "auto": sequential, stop when '
           "decided (min_runs..max_runs)."),
        _k("min_runs", "integer", "6", 'With runs = "auto": runs per side before the first look.'),
        _k("max_runs", "integer", "40", 'With runs = "auto": runs per side at the last look.'),
        _k("stop_on", "string", '"primary"',
           'With runs = "auto": the rows that must be decided to stop: primary (every row when none is) or all.'),
        _k("spending", "string", '"pocock"',
           'With runs = "auto": error-spending function of the group-sequential design: pocock, obrien-fleming, '
           "linear."),
        _k("warmup", "integer", "1", f"Unmeasured runs per side and workload before the measured ones, 0..{MAX_WARMUP}."),
        _k("order", "string", '"interleaved"', f"Run order: {', '.join(ORDERS)}."),
        _k("seed", "integer", "1", "Seed of the randomized order."),
        _k("pin", "string or integer", "none", 'CPUs the workload runs on, e.g. "1" or "0-1,3" (sched_setaffinity).'),
        _k("max_failures", "integer", "a quarter of the plan, at least 3",
           "Abort the session when more measured runs than this fail. Unset, a session also stops once the "
           "first 3 runs of a sweep point all fail to parse."),
        _k("stdout_cap", "integer", "65536", "Bytes of each run's stdout and stderr kept verbatim; a parsed output longer than this fails the run (raise it)."),
        _k("alpha", "float", "0.05", "False discovery rate (or family-wise error with holm) for `**`."),
        _k("confidence", "float", "0.95", "Confidence level of the reported intervals."),
        _k("fdr", "string", '"bh"', "Multiplicity control across a report's rows: bh (Benjamini-Hochberg) or holm."),
        _k("margin", "float", "0.1", "Percent: a change shown to lie within +-margin is `flat`."),
        _k("method", "string", '"nonparametric"', f"Default statistical method: {', '.join(METHODS)}."),
        _k("baseline", "string", "the first variant", "Name of the baseline variant."),
        _k("build", "array of strings, or a string", "[]",
           "Build command for every side without its own (argv, with {variant}; one string runs with /bin/sh -c); "
           "run once per session before any run."),
        _k("repo", "string", "the repository holding the spec", "Git repository that variant.git refs name."),
        _k("build_timeout", "float", "3600", "Seconds a side's build may take."),
    ),
    "variant": (
        _k("name", "string", "required", "Side name, usable as {variant} in commands."),
        _k("env", "table of strings", "{}", "Extra environment of this side's runs, setup and services."),
        _k("wrap", "array of strings", "[]", 'Command prefix for this side\'s runs, e.g. ["taskset", "-c", "1"].'),
        _k("vars", "table of strings", "{}", "Extra placeholders for this side, e.g. {bin = \"./build/a\"} gives {bin}."),
        _k("setup", "array of strings", "[]", "Shell commands run each time the runner switches to this side."),
        _k("teardown", "array of strings", "[]", "Shell commands run each time it switches away, always."),
        _k("external", "boolean", "false",
           "The side cannot be switched within a session (a booted kernel): one session per side."),
        _k("detect", "string", "none", "Shell command whose output tells which external side this machine is."),
        _k("detect_pattern", "string", "none", "Regex matched against detect's output."),
        _k("git", "string", "none",
           "Build this side from this commit (a ref), checked out in a cache keyed by commit and build command; "
           "gives {src} and {build}."),
        _k("build", "array of strings, or a string", "experiment.build",
           "This side's build command (argv; one string runs with /bin/sh -c), in {src}, once per session."),
        _k("kernel", "table", "none",
           'The Linux kernel this side boots under QEMU for each run (see variant.kernel); needs the guest backend.'),
    ),
    "variant.kernel": (
        _k("image", "string", "none: build from source",
           "A prebuilt kernel image (bzImage, e.g. /boot/vmlinuz-6.1.0-...-amd64) to boot on this side."),
        _k("symbols", "string", "System.map-VERSION beside a /boot image",
           "System.map or vmlinux of the image: names the kernel symbols counted."),
        _k("cmdline", "string", '""', "Kernel command line of this side (perfab adds console=ttyS0 and its init)."),
        _k("source", "string", "/usr/src/linux-source-6.1.tar.xz (package linux-source-6.1)",
           "Kernel source tree, tarball or git repository to build from (out of tree, cached by source, resolved "
           "config, patches and compiler)."),
        _k("ref", "string", "none", "With a git repository as source: the branch, tag or commit to build."),
        _k("base", "string", '"tinyconfig"',
           f"Base config: {', '.join(KERNEL_BASES)} or the path of a .config (tinyconfig gets what the guest needs)."),
        _k("config", "table of strings", "{}",
           'Options on top of the base, e.g. {PARAVIRT_SPINLOCKS = "n", NR_CPUS = "4"}; one that does not exist or '
           "that olddefconfig drops is refused before any build."),
        _k("patches", "array of strings", "[]", "Patch files applied (in order) to a private copy of the source."),
    ),
    "workload": (
        _k("name", "string", "required", "Workload name: a row group in the report."),
        _k("argv", "array of strings", "required", "The command; a single string when shell = true."),
        _k("shell", "boolean", "false", "Run argv (one string) with /bin/sh -c."),
        _k("cwd", "string", "perfab's working directory", "Working directory of the runs (placeholders allowed)."),
        _k("timeout", "float", "600", "Seconds; a run taking longer is killed and recorded as failed."),
        _k("parser", "string", "none", "Parser of the workload's output (see Parsers)."),
        _k("parser_options", "table", "{}", "Options of that parser, with their types under Parsers."),
        _k("setup", "array of strings", "[]",
           "Shell commands run once before this workload's runs ({workload} and {experiment} only)."),
        _k("teardown", "array of strings", "[]", "Shell commands run once after them, always."),
        _k("params", "table of arrays", "{}",
           'Sweep parameters, e.g. {threads = [1, 2, "100%"]} ("N%" of the online CPUs); each is a placeholder.'),
        _k("service", "table", "none", "A server the workload talks to, started per side (see workload.service)."),
        _k("metric", "array of tables", "[]", "Declarations of the workload's metrics (see workload.metric)."),
    ),
    "workload.service": (
        _k("argv", "array of strings", "required",
           "The server command, with the side's placeholders; started on every switch to a side, stopped after."),
        _k("port", "integer", "none",
           "Wait until 127.0.0.1:port accepts connections; refused when something already listens there."),
        _k("ready_timeout", "float", "10", "Seconds to wait for the port."),
        _k("cwd", "string", "perfab's working directory", "Working directory of the server."),
        _k("log", "string", ".perfab/logs", "Directory for the server's output (one file per start)."),
        _k("requests", "string", "none",
           "Client metric counting requests (e.g. complete_requests): the server's CPU time is also given per request."),
        _k("counters", "string", "none",
           'With the perf backend, also count the server: "pids" (perf stat -p on its processes) or "cpus" '
           "(perf stat -a -C service.cpus); metrics service.<event>."),
        _k("cpus", "string", "none", 'The CPUs counted with counters = "cpus", e.g. "1".'),
    ),
    "workload.metric": (
        _k("name", "string", "required", "Metric name as the parser or backend produces it."),
        _k("label", "string", "the name", "Row label in the report."),
        _k("unit", "string", "the parser's", "Unit shown with the values."),
        _k("direction", "string", "the parser's", f"Which way is better: {', '.join(DIRECTIONS)}."),
        _k("margin", "float", "experiment.margin", "Percent equivalence margin of this metric."),
        _k("primary", "boolean", "false", "A `**` regression here fails `report --fail-on-regression`."),
        _k("check", "float", "none", "Every run must show exactly this value (e.g. 0 failed requests): `valid`."),
        _k("method", "string", "experiment.method", f"Statistical method of this metric: {', '.join(METHODS)}."),
    ),
    "measure": (
        _k("backend", "string", "the registry's first", "How runs are measured: a backend of perfab.run.backends."),
        _k("counters", "array of strings", "[]", "perf events to count (perf backend), e.g. [\"cycles\", \"instructions:k\"]."),
        _k("max_events_per_run", "integer", "probed", "PMU counter budget per run (perf backend)."),
        _k("l1i", "string", "the host's",
           'cachegrind (or guest cache_sim) I1 geometry "size,assoc,line", e.g. "32K,8,64".'),
        _k("l1d", "string", "the host's", "cachegrind D1 geometry."),
        _k("ll", "string", "the host's", "cachegrind last-level geometry."),
        _k("branch_sim", "boolean", "false", "cachegrind: simulate branch predictors (--branch-sim=yes)."),
        _k("callgrind_toggle", "string", "none", "Count only inside this function (callgrind --toggle-collect)."),
        _k("interrupts", "array of strings", "[]",
           'Rows of /proc/interrupts counted over each run, machine-wide (e.g. ["TLB", "CAL"]): interrupts.TLB; '
           "with the guest backend, the guest's."),
        _k("vcpus", "integer", "1", 'guest backend: virtual CPUs of each guest, 1..64.'),
        _k("memory", "integer", "512", "guest backend: guest memory in MiB, 64..65536."),
        _k("accel", "string", '"auto"',
           f"guest backend: {', '.join(ACCELS)}; auto uses KVM when a short probe boot works, else TCG."),
        _k("files", "array of strings", "[]",
           "guest backend: host files copied into each guest at the same path (the workload's program and its "
           "libraries are copied without asking)."),
        _k("vmstat", "array of strings", "[]",
           'guest backend: /proc/vmstat rows counted over each run in the guest, e.g. ["pgfault"]: vmstat.pgfault.'),
        _k("cache_sim", "boolean", "false",
           "guest backend under TCG: simulate L1i, L1d and LL (geometry from l1i, l1d, ll, else 32K,8,64 / "
           "32K,8,64 / 8M,16,64), split user/kernel."),
        _k("profile", "boolean", "false", "Also sample every run with perf record; per-symbol self-time diff."),
        _k("profile_event", "string", "cycles, or cpu-clock without a PMU", "Event perf record samples."),
        _k("profile_freq", "integer", "999", "Samples per second."),
    ),
}

TOP_LEVEL = ("experiment", "variant", "workload", "measure")


def allowed(table: str) -> set[str]:
    return {k.name for k in TABLES[table]}


def required(table: str) -> set[str]:
    return {k.name for k in TABLES[table] if k.default == "required"}


def reference_markdown() -> str:
    """The spec reference for the README: one table per spec table."""
    heads = {"experiment": "[experiment]", "variant": "[[variant]]", "workload": "[[workload]]",
             "variant.kernel": "[variant.kernel]", "workload.service": "[workload.service]", "workload.metric": "[[workload.metric]]",
             "measure": "[measure]"}
    out: list[str] = []
    for table, keys in TABLES.items():
        keys = tuple(_backend_key(k) if (table, k.name) == ("measure", "backend") else k for k in keys)
        out += [f"#### `{heads[table]}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| `{k.name}` | {k.kind} | {k.default.replace('|', '/')} | {k.doc.replace('|', '/')} |" for k in keys]
        out.append("")
    return "\n".join(out)


def _backend_key(key: Key) -> Key:
    """``[measure] backend`` as the registry lists the backends (they live above the spec, with the runner)."""
    from perfab.run.backends import BACKENDS, DEFAULT

    return replace(key, default=f'"{DEFAULT}"', doc=f"How runs are measured: {', '.join(BACKENDS)}.")
