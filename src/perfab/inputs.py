"""What an experiment reads, so that no output path (``run --html``, ``report -o``) replaces it.

``experiment_inputs`` lists the files an experiment's sessions read and
the directories whose files they read, each with a few words saying what
it is: the spec; every side's workload program at every sweep point (found
as exec finds it: from the workload's directory, or on the side's PATH),
its ``wrap`` program and its service's program; each kernel side's image
and symbols (placeholders expanded per side; a prebuilt image's
System.map beside it) and ``measure.files``; and the build products: a
side's ``{build}`` directory, its git checkout, and perfab's kernel cache
where built kernels live.  ``sources`` (a stored session's) adds the
programs and kernel images a session recorded, so ``report -o`` refuses
them with no spec at hand.  ``perfab.outputs.refuse_input`` compares the
output with these through symlinks, ``..`` and hard links.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from perfab.errors import PerfabError
from perfab.plan import sweep_points
from perfab.specfile import Experiment, Variant, expand, placeholders

KERNEL_CACHE = Path(".perfab") / "kernel"  # perfab.kernel.build.DEFAULT_CACHE: built kernels and their sources


def experiment_inputs(exp: Experiment, sources: dict | None = None,
                      built: dict | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(files, directories) ``exp`` reads, each ``{path: what it is}``; ``sources`` is a stored session's
    ``sources`` (programs and kernels recorded), ``built`` maps a side built from source to its
    ``perfab.run.build.Source`` ({src}, {build})."""
    files: dict[str, str] = {exp.path: "experiment spec"}
    dirs: dict[str, str] = {}
    for v in exp.variants:
        source = built.get(v.name) if built else None
        values = source.values() if source is not None else None
        for path, what in _programs(exp, v, values).items():
            files.setdefault(path, what)
        if v.kernel is not None:
            _kernel(exp, v, files, dirs)
        if source is not None:
            dirs[source.build_dir] = f"build directory of side {v.name!r}"
            if source.commit:
                dirs[str(Path(source.src).parent)] = f"checkout of side {v.name!r}"
        recorded = (sources or {}).get(v.name) or {}
        for path in (recorded.get("programs") or {}) if isinstance(recorded, dict) else ():
            files.setdefault(path, f"program of side {v.name!r}")
        kernel = recorded.get("kernel") if isinstance(recorded, dict) else None
        if isinstance(kernel, dict) and kernel.get("image"):
            files.setdefault(kernel["image"], f"kernel image of side {v.name!r}")
    if any(v.kernel is not None for v in exp.variants):
        for f in exp.measure.files:
            path = os.path.normpath(f if f.startswith("/") else "/" + f)
            (dirs if os.path.isdir(path) else files).setdefault(path, "file copied into the guests (measure.files)")
    return files, dirs


def refuse_inputs(output: str, exp: Experiment, sources: dict | None = None) -> None:
    """A UsageError when ``output`` is a file ``exp`` reads or lies in a directory of them (``sources``: a stored
    session's); sides built from source are resolved ({src}, {build}) without building anything."""
    from perfab.outputs import refuse_input
    from perfab.run.build import resolve

    try:
        built = resolve(exp, list(exp.variants))
    except PerfabError:
        built = {}  # the run itself names what is wrong with a side's source
    files, dirs = experiment_inputs(exp, sources, built)
    refuse_input(output, files, dirs)


def _programs(exp: Experiment, v: Variant, source: dict[str, str] | None) -> dict[str, str]:
    """The programs side ``v`` starts: each workload's argv[0], its wrap and its service, at every sweep point."""
    env = {**os.environ, **v.env}
    out: dict[str, str] = {}
    for w in exp.workloads:
        for point in sweep_points(w):
            values = placeholders(exp, v, w, point, source)
            try:
                cwd = expand(w.cwd, values) if w.cwd else os.getcwd()
                programs = [("workload program", expand(w.argv[0], values))] if not w.shell and w.argv else []
                programs += [("wrap program", expand(v.wrap[0], values))] if v.wrap else []
                programs += [("service program", expand(w.service.argv[0], values))] if w.service else []
            except PerfabError:
                continue  # the run's pre-flight names it
            for what, program in programs:
                path = _find(program, cwd, env)
                if path is not None:
                    out.setdefault(path, f"{what} of side {v.name!r}")
    return out


def _find(program: str, cwd: str, env: dict[str, str]) -> str | None:
    if "/" in program:
        return os.path.join(cwd, program)
    return shutil.which(program, path=env.get("PATH", os.defpath))


def _kernel(exp: Experiment, v: Variant, files: dict[str, str], dirs: dict[str, str]) -> None:
    """A kernel side's image and symbols (as the pre-flight expands them), or the cache its built kernel is in."""
    from perfab.kernel.preflight import side_kernel
    from perfab.kernel.sides import system_map

    try:
        k = side_kernel(exp, v)
    except PerfabError:
        return
    if k.image is None:
        dirs[str(KERNEL_CACHE.resolve())] = "kernel cache (built kernels)"
        return
    files.setdefault(k.image, f"kernel image of side {v.name!r}")
    symbols = k.symbols or system_map(Path(k.image))
    if symbols:
        files.setdefault(str(symbols), f"kernel symbols of side {v.name!r}")
