"""What each side runs, by content: the SHA-256 of the program file every workload starts on that side.

Stored with the session (``sessions.sources[side]["programs"]``) so that
sessions of one experiment whose side ran a different file (rebuilt by
hand between sessions, a new package) are told apart when they are pooled
(``perfab.analyse.pooling``).  A program is found as exec would find it:
a path with a ``/`` from the workload's directory, else on the side's
``PATH``; a shell command line, or a program that cannot be found or read,
is left out.
"""

from __future__ import annotations

import hashlib
import os
import shutil

from perfab.errors import PerfabError
from perfab.plan import sweep_points
from perfab.specfile import Experiment, Variant, expand, placeholders


def program_hashes(exp: Experiment, variant: Variant, env: dict[str, str], source: dict[str, str] | None) -> dict:
    """``{path: sha256}`` of the programs ``variant`` starts, over every workload and sweep point."""
    out: dict[str, str] = {}
    for workload in exp.workloads:
        if workload.shell or not workload.argv:
            continue
        for point in sweep_points(workload):
            values = placeholders(exp, variant, workload, point, source)
            try:
                program = expand(workload.argv[0], values)
                cwd = expand(workload.cwd, values) if workload.cwd else os.getcwd()
            except PerfabError:
                continue
            path = _find(program, cwd, env)
            if path is not None and path not in out and (digest := _digest(path)) is not None:
                out[path] = digest
    return out


def _find(program: str, cwd: str, env: dict[str, str]) -> str | None:
    if "/" in program:
        path = os.path.join(cwd, program)
    else:
        path = shutil.which(program, path=env.get("PATH", os.defpath))
    return os.path.realpath(path) if path and os.path.isfile(path) else None


def _digest(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def session_sources(exp: Experiment, sources: dict, sides: list[str] | None, env_of, source_of, real: bool) -> dict:
    """The session's ``sources``: each built side's ``Source`` and, when programs are real, their hashes."""
    out = {k: v.to_json() for k, v in sources.items()}
    if real:
        for v in exp.variants:
            if sides is None or v.name in sides:
                if programs := program_hashes(exp, v, env_of(v), source_of(v)):
                    out.setdefault(v.name, {})["programs"] = programs
    return out
