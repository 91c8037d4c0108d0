"""The spec's checks across keys: small named rules the reader runs around its loop over the schema.

``BEFORE[table]`` rules see a table as written, before its keys are read;
``AFTER[table]`` rules see it with its typed values; ``ACROSS`` rules see
the whole experiment.  Each refuses in one line naming the key and the fix.
"""

from __future__ import annotations

from typing import Any, Callable

from perfab.errors import SpecError, UsageError
from perfab.specfile import Experiment, Variant
from perfab.specfile import checks
from perfab.specfile.backends import DECLARATIONS, declared
from perfab.specfile.checks import AUTO, PLACEHOLDER
from perfab.specfile.kinds import At
from perfab.specfile.schema import LAYOUT_BUILDS, MAX_PLAN, RUNS, default, key, keys_by_backend, owner

_DESIGN = ("min_runs", "max_runs", "stop_on", "spending")  # the keys of a sequential design
_LOOKING_ORDERS = ("interleaved", "alternate")  # orders that finish a block before the next one starts


def no_nul(value: Any, at: At) -> None:
    """Strings with NUL bytes cannot reach exec(2) or a shell: refused wherever they are."""
    _no_nul(value, at.path, at.key)


def _no_nul(value: Any, path: str, where: str) -> None:
    """``no_nul`` below the dotted key ``where`` (an At is made only for a refusal)."""
    if isinstance(value, str):
        if "\0" in value:
            raise At(path, where or "spec").fail("contains a NUL byte (\\u0000)",
                                                 "remove it: commands cannot carry NUL")
    elif isinstance(value, dict):
        for k, v in value.items():
            if "\0" in k:
                raise At(path, f"{where}.{k!r}" if where else repr(k)).fail("key contains a NUL byte", "rename it")
            _no_nul(v, path, f"{where}.{k}" if where else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_nul(v, path, f"{where}[{i}]")


# -- [experiment] ----------------------------------------------------------------


def design_needs_auto(t: dict, at: At) -> None:
    """``min_runs``, ``max_runs``, ``stop_on`` and ``spending`` mean nothing without ``runs = "auto"``."""
    if "runs" in t:
        RUNS.read(t["runs"], at.child("runs"))
    if t.get("runs") != AUTO:
        for name in _DESIGN:
            if name in t:
                raise at.child(name).fail('is read only with runs = "auto"',
                                          'set runs = "auto" (a sequential experiment) or remove it')


def sequential_design(t: dict, values: dict, at: At) -> None:
    """A sequential experiment's bounds in order, and an order that looks after each block."""
    if values["runs"] != AUTO:
        return
    if values["max_runs"] < values["min_runs"]:
        raise at.child("max_runs").fail(f"{values['max_runs']} is below min_runs {values['min_runs']}",
                                        "raise max_runs or lower min_runs")
    if values["order"] not in _LOOKING_ORDERS:
        raise at.child("order").fail('a sequential experiment (runs = "auto") looks after each block',
                                     'use order = "interleaved" or "alternate"')


def build_time(t: dict, values: dict, at: At) -> None:
    """A build given no time cannot run."""
    if values["build_timeout_s"] == 0:
        seconds = default("experiment", "build_timeout")
        raise at.child("build_timeout").fail("must be > 0, got 0",
                                             f"give the seconds a build may take (default {seconds:g})")


def baseline(name: str | None, variants: tuple[Variant, ...], at: At) -> str:
    """The baseline side: the one named, or the first."""
    if name is None:
        return variants[0].name
    if name not in {v.name for v in variants}:
        raise at.child("experiment").child("baseline").fail(
            f"no variant named {name!r}", f"use one of: {', '.join(v.name for v in variants)}")
    return name


# -- [[variant]], [[workload]], their sub-tables ---------------------------------------


def detect_needs_pattern(t: dict, values: dict, at: At) -> None:
    """An external side's ``detect`` command is matched by ``detect_pattern``."""
    if values["detect"] and not values["detect_pattern"]:
        raise at.child("detect_pattern").fail("missing", "add the regex that detect's output must match")


def prebuilt_or_built(t: dict, values: dict, at: At) -> None:
    """A prebuilt kernel image is not built: the keys of a build would be ignored."""
    building = [name for name in ("source", "ref", "base", "config", "patches") if name in t]
    if values["image"] is not None and building:
        raise at.child("image").fail(f"a prebuilt image is not built: {', '.join(building)} would be ignored",
                                     f"remove {building[0]} or the image")


def argv_shape(t: dict, values: dict, at: At) -> None:
    """A string command runs with ``shell = true``, a list names its program; neither is empty."""
    where = at.child("argv")
    if isinstance(t["argv"], str):
        if not values["shell"]:
            raise where.fail("a string command needs shell = true",
                             'write argv as a list ["prog", "arg"] or add shell = true')
        return
    if not values["argv"]:
        raise where.fail("is empty", "name the program to run")
    if values["shell"]:
        raise where.fail("shell = true takes one command string", 'write argv = "cmd | cmd"')
    if not values["argv"][0]:
        raise At(at.path, f"{where.key}[0]").fail("is an empty program name", "name the program to run")


def parser_known(t: dict, values: dict, at: At) -> None:
    """The parser exists and accepts its options; options need a parser."""
    name, options = values["parser"], values["parser_options"]
    if name is None:
        if options:
            raise at.child("parser_options").fail("given without a parser", "add parser = \"...\" or remove them")
        return
    from perfab.parsers import get_parser

    try:
        get_parser(name, options)
    except UsageError as e:
        which = "parser" if "unknown parser" in str(e) else "parser_options"
        raise at.child(which).fail(str(e).rstrip("."), "see the Parsers section of the README") from None


def cpus_with_counters(t: dict, values: dict, at: At) -> None:
    """``cpus`` goes with ``counters = "cpus"``, and only with it."""
    if (values["counters"] == "cpus") != (values["cpus"] is not None):
        raise at.child("cpus").fail('goes with counters = "cpus" (and only with it)',
                                    'set both, e.g. counters = "cpus" and cpus = "1"')


# -- [measure] ----------------------------------------------------------------------


def backend_keys(t: dict, at: At) -> None:
    """Each backend's own keys are refused under another backend (unless it borrows or shares them)."""
    backend = key("measure", "backend").value.read(t.get("backend", default("measure", "backend")),
                                                    at.child("backend"))
    perf_counters(backend, t, at)
    keys = keys_by_backend()
    entry = keys[backend]
    borrowed = (*entry.shares, *(entry.borrows if t.get(entry.borrows_when) is True else ()))
    for name in t:
        mine = owner(name)
        if mine is None or mine == backend or name in borrowed:
            continue
        also = "".join(f" (or {b} with {e.borrows_when} = true)" for b, e in keys.items() if name in e.borrows)
        also += "".join(f" (or {b})" for b, e in keys.items() if name in e.shares)
        raise at.child(name).fail(f"is read by the {mine} backend{also}, not {backend!r}",
                                  f'set backend = "{mine}"{keys[mine].fix} or remove {name}')


def perf_counters(backend: str, t: dict, at: At) -> None:
    """The keys the chosen backend cannot do without are there (perf's counters), and a list of counters is
    refused by the other backends only when it lists events."""
    for need in declared(backend).required:
        if not t.get(need.key):
            raise at.child(need.key).fail(need.problem, need.fix)
    counter = owner("counters")
    if t.get("counters") and backend != counter:
        raise at.child("counters").fail(f"counters are read by the {counter} backend, not {backend!r}",
                                        f'set backend = "{counter}" or remove counters')


# -- the whole experiment -------------------------------------------------------------


def sides_alike(exp: Experiment, at: At) -> None:
    """Either every side is external or none is."""
    if any(v.external for v in exp.variants) and not all(v.external for v in exp.variants):
        raise At(at.path, "variant.external").fail("some sides are external and some are not",
                                                   "mark every side external = true (e.g. two booted kernels) or none")


def plan_size(exp: Experiment, at: At) -> None:
    """The whole plan fits one session."""
    from perfab.plan import sweep_points

    total = sum(len(sweep_points(w)) * len(exp.variants) * (exp.runs + exp.warmup) for w in exp.workloads)
    if total > MAX_PLAN:
        raise At(at.path, "experiment.runs").fail(f"the plan would hold {total:,} runs (more than {MAX_PLAN:,})",
                                                  "lower runs, warmup or the sweep's points")


def kernel_sides(exp: Experiment, at: At) -> None:
    """Kernel sides go with the guest backend, every side boots one, and none is external; sides that this
    machine kexecs into (boot = "kexec") go with a host backend instead (``kexec_sides``)."""
    if any(v.kernel is not None and v.kernel.boot == "kexec" for v in exp.variants):
        return kexec_sides(exp, at)
    kernels = [v.kernel is not None for v in exp.variants]
    guest = declared(exp.measure.backend).boots_kernels
    where = At(at.path, "measure.backend")
    if any(kernels) and not guest:
        booter = next(b.name for b in DECLARATIONS.values() if b.boots_kernels)
        raise where.fail("sides with a [variant.kernel] boot a guest for each run",
                         f'set [measure] backend = "{booter}", or boot = "kexec" in each [variant.kernel] to run '
                         "them on this machine")
    if guest and not all(kernels):
        side = exp.variants[kernels.index(False)].name
        raise where.fail(f'"{exp.measure.backend}" boots each side\'s kernel, and side {side!r} names none',
                         "add a [variant.kernel] table to every side (image = ... or a source to build)")
    if guest and exp.variants[0].external:
        raise At(at.path, "variant.external").fail("a kernel side is booted by perfab, not by the machine",
                                                   "remove external (and detect) from the kernel sides")
    for v in exp.variants:
        if v.kernel is not None and (v.kernel.initrd is not None or v.kernel.boot_timeout_s != 300.0):
            name = "initrd" if v.kernel.initrd is not None else "boot_timeout"
            raise At(at.path, f"variant.kernel.{name}").fail(f'side {v.name!r}: is read only with boot = "kexec"',
                                                             'remove it, or set boot = "kexec"')


def kexec_sides(exp: Experiment, at: At) -> None:
    """Sides this machine kexecs into: every side one, a host backend, a plan fixed before the first boot."""
    where = At(at.path, "variant.kernel.boot")
    for v in exp.variants:
        if v.kernel is None or v.kernel.boot != "kexec":
            raise where.fail(f"side {v.name!r} does not kexec while another side does",
                             'give every side a [variant.kernel] with boot = "kexec"')
    if declared(exp.measure.backend).boots_kernels:
        host = ", ".join(b.name for b in DECLARATIONS.values() if not b.boots_kernels)
        raise At(at.path, "measure.backend").fail(f'"{exp.measure.backend}" boots guests, and boot = "kexec" runs '
                                                  "each side on this machine", f"use a host backend ({host})")
    if exp.variants[0].external:
        raise At(at.path, "variant.external").fail('perfab switches kexec sides itself (boot = "kexec")',
                                                   "remove external (and detect)")
    if exp.sequential is not None:
        raise At(at.path, "experiment.runs").fail('a kexec session plans its boots before the first one',
                                                  "give runs a number of runs per side")
    if exp.layout_check:
        raise At(at.path, "experiment.layout_check").fail('is not run with boot = "kexec"',
                                                          "run the aligned kernels as an experiment of their own")


def default_layout_builds(e: dict, variants: tuple[Variant, ...], measure, sequential) -> int:
    """``layout_builds`` unset: ``LAYOUT_BUILDS`` where cachegrind, which repeats one code placement exactly, measures
    sides that perfab builds with ``{layout_cflags}`` in a fixed design; else 1 (one build per side)."""
    if not declared(measure.backend).simulated or declared(measure.backend).boots_kernels or sequential:
        return 1
    builds = [" ".join(v.build or e["build"]) for v in variants]
    if not all("{layout_cflags}" in b for b in builds) or any(v.kernel is not None for v in variants):
        return 1
    return min(LAYOUT_BUILDS, e["runs"])


def layout_built(exp: Experiment, at: At) -> None:
    """``layout_builds`` builds every side several times with seeded pads: each side must be one perfab builds with
    ``{layout_cflags}``, on this machine (a guest side's kernel varies by its boots instead)."""
    if exp.layout_builds == 1:
        return
    where = At(at.path, "experiment.layout_builds")
    if any(v.kernel is not None for v in exp.variants):
        raise where.fail("builds user-space sides; a kernel side's runs vary by its boots (measure.boots)",
                         "remove layout_builds")
    if exp.sequential is not None:
        raise where.fail('a sequential design adds runs, and here the build is the unit',
                         "give runs a number of runs per side (they are spread over the builds)")
    _built_with_layout_cflags(exp, where, "remove layout_builds")


def _built_with_layout_cflags(exp: Experiment, where: At, or_else: str) -> None:
    """Every side perfab builds, with ``{layout_cflags}`` passed to its compiler."""
    for v in exp.variants:
        build = " ".join(v.build or exp.build)
        if "{layout_cflags}" not in build:
            raise where.fail(f"side {v.name!r} is not built with {{layout_cflags}}",
                             "pass it to the compiler in the build command (e.g. CFLAGS=\"-O2 {layout_cflags}\"), "
                             f"or {or_else}")


def layout_checked(exp: Experiment, at: At) -> None:
    """``layout_check`` rebuilds every side with functions aligned: each side must be one perfab builds."""
    if not exp.layout_check:
        return
    where = At(at.path, "experiment.layout_check")
    for v in exp.variants:
        if v.kernel is not None:
            if v.kernel.image is not None:
                raise where.fail(f"side {v.name!r} boots a prebuilt image, which cannot be rebuilt with aligned "
                                 "functions", "build its kernel from source (remove image), or remove layout_check")
            continue
        build = " ".join(v.build or exp.build)
        if "{layout_cflags}" not in build:
            raise where.fail(f"side {v.name!r} is not built with {{layout_cflags}}",
                             "pass it to the compiler in the build command (e.g. CFLAGS=\"-O2 {layout_cflags}\"), "
                             "or remove layout_check")


def guest_boots(exp: Experiment, at: At) -> None:
    """Saved guests make the boot the unit (``perfab.replication``): a sequential design, which adds runs, cannot
    add boots.  (A fixed design with fewer runs than boots boots once per run; ``perfab plan`` warns what it cannot
    show.)"""
    m = exp.measure
    if not declared(m.backend).boots_kernels or not m.snapshot or m.accel == "kvm" or not exp.perturb:
        return
    if exp.sequential is not None and m.boots > 1:
        raise At(at.path, "experiment.runs").fail(
            f'a sequential design adds runs, and here the boot is the unit (measure.boots = {m.boots})',
            "give runs a number of runs per side (they are spread over the boots), or set measure.snapshot = "
            "false (every run boots: the run is the unit)")


def no_shadowed_params(exp: Experiment, at: At) -> None:
    """A side's ``vars`` entry named like a sweep parameter would replace every sweep value, and a build
    (once per side) cannot use one: both refused."""
    swept = {name: (i, wl.name) for i, wl in enumerate(exp.workloads) for name, _ in wl.params}
    for name, (i, _) in swept.items():
        clash = [v.name for v in exp.variants if name in v.vars]
        if clash:
            raise At(at.path, f"workload[{i}].params.{name}").fail(
                f"variant {clash[0]!r} also sets vars.{name}, which would replace every sweep value of {{{name}}}",
                "rename the variable or the sweep parameter")
    for v in exp.variants:
        for text in v.build or exp.build:
            for name in PLACEHOLDER.findall(text):
                if name in swept and name not in v.vars:
                    raise SpecError(f"{at.path}: variant {v.name!r} build: {{{name}}} is a sweep parameter of "
                                    f"workload {swept[name][1]!r}, but a side is built once, for all sweep points; "
                                    "use it in the workload's argv, or a variant's vars, instead")


def service_counters(exp: Experiment, at: At) -> None:
    """A service's counters ask for a backend that counts a service (perf, with perf stat)."""
    if declared(exp.measure.backend).counts_service:
        return
    for i, wl in enumerate(exp.workloads):
        if wl.service is not None and wl.service.counters:
            counter = next(b for b in DECLARATIONS.values() if b.counts_service)
            raise At(at.path, f"workload[{i}].service.counters").fail(
                f"counts with {counter.counts_service}",
                f'set [measure] backend = "{counter.name}" or remove service.counters')


def service_in_guest(exp: Experiment, at: At) -> None:
    """A service that starts in each run's guest (the guest backend) is pinned to vCPUs the guest has,
    and leaves one for the workload."""
    if not declared(exp.measure.backend).runs_service:
        return
    vcpus = exp.measure.vcpus
    for i, wl in enumerate(exp.workloads):
        if wl.service is not None and wl.service.counters == "pids":
            raise At(at.path, f"workload[{i}].service.counters").fail(
                "a server in the guest is counted by the vCPUs it is pinned to, not by its processes",
                'set counters = "cpus" and cpus = "1" (with measure.vcpus = 2 or more)')
        if wl.service is None or not wl.service.cpus:
            continue
        cpus = checks.cpu_list(wl.service.cpus)
        where = At(at.path, f"workload[{i}].service.cpus")
        if not cpus or max(cpus) >= vcpus:
            raise where.fail(f"{wl.service.cpus!r} names a vCPU the guest does not have (measure.vcpus = {vcpus})",
                             f"pin the server to vCPUs 0..{vcpus - 1}, or raise measure.vcpus")
        if len(cpus) >= vcpus:
            raise where.fail(f"{wl.service.cpus!r} leaves none of the guest's {vcpus} vCPUs for the workload",
                             "raise measure.vcpus, or pin the server to fewer vCPUs")


BEFORE: dict[str, tuple[Callable[[dict, At], None], ...]] = {
    "experiment": (design_needs_auto,),
    "measure": (backend_keys,),
}
AFTER: dict[str, tuple[Callable[[dict, dict, At], None], ...]] = {
    "experiment": (sequential_design, build_time),
    "variant": (detect_needs_pattern,),
    "variant.kernel": (prebuilt_or_built,),
    "workload": (argv_shape, parser_known),
    "workload.service": (cpus_with_counters,),
}
ACROSS: tuple[Callable[[Experiment, At], None], ...] = (
    sides_alike, plan_size, kernel_sides, layout_checked, layout_built, guest_boots, no_shadowed_params,
    service_counters, service_in_guest)
