"""The aligned pair of a layout check: the experiment again, with code and stack placed differently.

``layout_check = true`` asks whether a verdict is the change's or the
layout's.  ``aligned(exp)`` is the experiment ``NAME+align64``: the same
sides, workloads and plan, with

- kernel sides built with every function at a 64-byte boundary
  (``perfab.kernel.layout``);
- sides perfab builds given ``{layout_cflags}`` = ``-falign-functions=64``
  (the main pair gets an empty one), where the build command passes it to
  the compiler;
- ``layout = "random"``: each run's environment padded by a random number
  of bytes (0..4095, seeded), so the stack starts at a different offset in
  every run, on both sides alike (``perfab.run.layout``).

It is stored as an experiment of its own and runs after the main pair
(each pair interleaved within itself); the analysis of the main experiment
reads it (``perfab.analyse.layoutcheck``).
"""

from __future__ import annotations

from dataclasses import replace

from perfab.specfile import ALIGNED_SUFFIX, Experiment

SUFFIX = ALIGNED_SUFFIX  # the aligned pair's experiment is NAME+align64
ALIGN_CFLAGS = "-falign-functions=64"  # {layout_cflags} of the aligned pair


def aligned(exp: Experiment) -> Experiment:
    """The aligned pair of ``exp`` (see the module docstring)."""
    from perfab.kernel.layout import aligned_kernel

    variants = tuple(replace(v, kernel=aligned_kernel(v.kernel) if v.kernel is not None else None,
                             vars={**v.vars, "layout_cflags": ALIGN_CFLAGS}) for v in exp.variants)
    return exp.derive(name=exp.name + SUFFIX, variants=variants, layout="random", layout_check=False)


def pair(exp: Experiment) -> list[Experiment]:
    """The experiments ``perfab run`` runs for ``exp``: itself, then its aligned pair when it asks for one."""
    return [exp, aligned(exp)] if exp.layout_check else [exp]


def openings(store, exps: list[Experiment], resume: bool) -> list[tuple[Experiment, bool]]:
    """Which of ``exps`` to run and whether to resume each: without ``resume`` all, as new sessions; with it,
    each one with an unfinished session is resumed, one never run is begun, and one already finished is left
    alone (all of them finished: the first is resumed, which says there is nothing to resume)."""
    if not resume:
        return [(e, False) for e in exps]
    out = []
    for e in exps:
        if store.unfinished_session(e.name) is not None:
            out.append((e, True))
        elif not _has_sessions(store, e.name):
            out.append((e, False))
    return out or [(exps[0], True)]


def _has_sessions(store, name: str) -> bool:
    from perfab.errors import UsageError

    try:
        return bool(store.sessions(name))
    except UsageError:
        return False


def plan_lines(exp: Experiment, sides: list[str] | None = None) -> list[str]:
    """What ``perfab plan`` says of the aligned pair: that it runs next, and its kernels (checked, not built)."""
    if not exp.layout_check:
        return []
    from perfab.run.backends import make_backend

    two = aligned(exp)
    chosen = tuple(v for v in two.variants if sides is None or v.name in sides)
    return [f"layout check: then {two.name}, the same plan with every function aligned to 64 bytes and a random "
            "stack offset per run", *(f"  {line}" for line in make_backend(two.measure).plan_lines(chosen))]
