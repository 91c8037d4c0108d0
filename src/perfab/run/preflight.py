"""Checks made before a session is stored, and by ``perfab plan``: a typo never leaves an aborted session.

Every command of the session's schedule is expanded for every side and
sweep point it will run with (unknown placeholders), and the programs it
names are looked up the way exec(2) will look them up (present,
executable, not a directory), as are working directories.  The first problem is a ``UsageError``
naming the workload, the side and the fix.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from perfab.errors import UsageError
from perfab.specfile import Experiment, Variant, Workload, expand, placeholders, workload_placeholders


def preflight(exp: Experiment, schedule, env_of, programs: bool = True, sources: dict | None = None,
              built: bool = True) -> None:
    """Raise a UsageError for the first command of ``schedule`` that cannot run; ``env_of(variant)`` gives a
    side's environment.

    Every cell the schedule (``perfab.run.schedule.Schedule``) may enter is checked, in spec order.
    ``sources`` maps a side built from source to its ``perfab.run.build.Source`` ({src}, {build}); with
    ``programs`` False only placeholders are checked (before builds make the programs), with ``built``
    False the programs of the sides in ``sources`` are not looked up (they appear when built).
    """
    if programs and exp.pin is not None:
        pinned_cpus(exp.pin, exp.path)
    try:
        _preflight(exp, schedule.cells(exp), env_of, programs, sources or {}, built)
    except UsageError as e:
        raise type(e)(f"{exp.path}: {e}") from None


def _preflight(exp: Experiment, cells: list, env_of, programs: bool, sources: dict, built: bool) -> None:
    checked: set[str] = set()
    for workload_name, side, point in cells:
        workload, variant = exp.workload(workload_name), exp.variant(side)
        if workload.name not in checked:
            checked.add(workload.name)
            own = workload_placeholders(exp, workload)
            for command in (*workload.setup, *workload.teardown):
                expand(command, own, f"workload {workload.name!r} setup/teardown")
        source = sources.get(variant.name)
        look_up = programs and (built or source is None)
        _cell(exp, workload, variant, point, env_of(variant), look_up,
              source.values() if source is not None else None)


def _cell(exp: Experiment, workload: Workload, variant: Variant, point, env: dict[str, str], programs: bool,
          source: dict[str, str] | None) -> None:
    values = placeholders(exp, variant, workload, point, source)
    where = f"workload {workload.name!r}, variant {variant.name!r}"
    x = lambda text, key: expand(text, values, f"{where}, {key}")  # noqa: E731
    argv = [x(a, "workload.argv") for a in workload.argv]
    wrap = [x(a, "variant.wrap") for a in variant.wrap]
    cwd = x(workload.cwd, "workload.cwd") if workload.cwd else None
    for key in ("setup", "teardown"):
        for text in getattr(variant, key):
            x(text, f"variant.{key}")
    svc = workload.service
    svc_argv = [x(a, "workload.service.argv") for a in svc.argv] if svc else []
    svc_cwd = x(svc.cwd, "workload.service.cwd") if svc and svc.cwd else None
    if not programs:
        return
    for directory, key in ((cwd, "cwd"), (svc_cwd, "service.cwd")):
        if directory is not None and not Path(directory).is_dir():
            raise UsageError(f"{where}: {key} {directory!r} is not a directory; create it or fix workload.{key}")
    here = cwd or os.getcwd()
    if not workload.shell:
        check_program(argv[0], env, here, f"{where}: argv[0]")
    if wrap:
        check_program(wrap[0], env, here, f"{where}: wrap[0]")
    if svc_argv:
        check_program(svc_argv[0], env, svc_cwd or os.getcwd(), f"{where}: service argv[0]")


def pinned_cpus(pin: str, spec_path: str) -> set[int]:
    """The CPUs of a pin list; each must be one this process may run on, else every run would fail."""
    cpus: set[int] = set()
    for part in pin.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    allowed = os.sched_getaffinity(0)
    missing = sorted(cpus - allowed)
    if missing:
        raise UsageError(f"{spec_path}: experiment.pin: CPU {missing[0]} in {pin!r} is not available here (this "
                         f"machine offers {_ranges(sorted(allowed))}); pin to those CPUs")
    return cpus


def _ranges(cpus: list[int]) -> str:
    out, start = [], None
    for i, c in enumerate(cpus):
        start = c if start is None else start
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(f"{start}-{c}" if c != start else str(c))
            start = None
    return ",".join(out)


def check_program(program: str, env: dict[str, str], cwd: str, where: str) -> None:
    """The program exec(2) would run: a path relative to ``cwd``, or looked up in the environment's PATH."""
    if "/" in program:
        path = Path(program) if os.path.isabs(program) else Path(cwd) / program
        problem = _problem(path)
        if problem:
            raise UsageError(f"{where} {program!r} {problem}; build it or fix the path (relative to {cwd})")
        return
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise UsageError(f"{where} {program!r} is not on the PATH of this side; install it or give its full path")


def _problem(path: Path) -> str | None:
    if not path.exists():
        return "does not exist"
    if path.is_dir():
        return "is a directory"
    if not os.access(path, os.X_OK):
        return "is not executable (chmod +x it)"
    return None
