"""What a session knows of each side: its environment, its built source, its placeholders and directories."""

from __future__ import annotations

import os

from perfab.plan import Params
from perfab.specfile import Experiment, Variant, Workload, expand, placeholders


class Sides:
    """Each side's environment (built once) and source (set once built); placeholders and cwd of a run."""

    def __init__(self, exp: Experiment):
        self.exp = exp
        self.sources: dict = {}  # side -> perfab.run.build.Source, for sides built from source
        self.layouts: dict = {}  # side -> its layout builds' Sources, the first its own (experiment.layout_builds)
        self._envs: dict[str, dict[str, str]] = {}  # side -> environment, built on first use

    def env(self, variant: Variant) -> dict[str, str]:
        """The side's environment: perfab's own, the side's ``env`` over it, and ``LC_ALL=C``."""
        env = self._envs.get(variant.name)
        if env is None:
            env = dict(os.environ)
            env.update(variant.env)
            env["LC_ALL"] = "C"
            self._envs[variant.name] = env
        return env

    def source(self, variant: Variant, build: int = 0) -> dict[str, str] | None:
        """The side's ``{src}`` and ``{build}`` when it is built from source (of its layout build ``build``), else
        None."""
        layouts = self.layouts.get(variant.name)
        source = layouts[build % len(layouts)] if layouts else self.sources.get(variant.name)
        return source.values() if source is not None else None

    def values(self, variant: Variant, workload: Workload, params: Params, build: int = 0) -> dict[str, str]:
        """The placeholders of ``workload``'s runs on ``variant`` at sweep point ``params`` (on layout build
        ``build``)."""
        return placeholders(self.exp, variant, workload, params, self.source(variant, build))

    def cwd(self, workload: Workload, values: dict[str, str]) -> str | None:
        """The workload's working directory with the run's placeholders, None for perfab's own."""
        if workload.cwd is None:
            return None
        return expand(workload.cwd, values, f"workload {workload.name!r} cwd")
