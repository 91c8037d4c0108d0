"""The ``cachegrind`` backend: instruction and cache-miss counts without a PMU.

Valgrind runs the workload on a simulated CPU and counts every instruction
and every access to a simulated I1/D1/LL cache.  The counts are
deterministic: the same binary, arguments and environment give the same
numbers on every run, so they are marked ``exact``.  That makes this the
backend for VMs and CI machines, where ``perf stat -e cycles`` says
``<not supported>``.

What the simulation is not: it sees user space only, has no prefetcher,
no micro-op cache and no out-of-order core.  I1 misses measure how much
code a run touches against a cache of the given size (a code-footprint
signal, as when inlining a function grows every call site); they do not
predict stalls.  Every measurement carries that caveat as a note, with the
valgrind version and the cache geometry simulated, so a report can warn
when two sides differ in either.

Geometry: each of ``l1i``, ``l1d``, ``ll`` is ``"size,assoc,line"``
(``"32K,8,64"``); any left out is the host's, from sysfs or ``lscpu -C``
(see ``perfab.machine.caches``).  A host cache valgrind cannot simulate (set count
not a power of two, e.g. a 27.5M 11-way L3) is simulated at the nearest
geometry valgrind accepts, with a note; a user-given one is refused.

Children: valgrind follows every child process and ``execve``
(``--trace-children=yes``) and the counts of all processes are summed, one
out file each (``cachegrind.out.<pid>``).  That is the default because the
runner puts ``/bin/sh -c`` (shell workloads) and a variant's ``wrap`` prefix
(``taskset``, ``env``, ...) *inside* the backend's command: without
following, valgrind would count the shell and not the workload (dash forks
it), or count nothing at all (``taskset`` execs it, and an exec'd program
runs natively).  For a single-process workload both settings give the same
numbers.  A child forked without an exec starts from a copy of its
parent's counts, so the sum counts the parent's work before the fork twice:
deterministic, but worth knowing for fork-heavy workloads.
``trace_children=False`` counts only the first process; a run that then
leaves no out file is reported as a failure naming that cause.

Determinism holds for the program's instructions, not its inputs: a
workload that prints a clock-derived number (lockbench's ``ops/s``) varies
by a few dozen instructions in millions between runs.

Branches: ``branch_sim = true`` adds valgrind's simulated predictors
(``--branch-sim=yes``: a 16K-entry table of 2-bit counters for
conditional branches, a 512-entry target cache for indirect ones):
``branches``, ``branch mispredicts`` and the indirect ones apart, the
extra call/ret and indirect-call cost of a paravirt-style lock path.

Region mode: ``callgrind_toggle="FUNC"`` runs callgrind instead, counting
only while ``FUNC`` (callgrind's wildcards allowed) and its callees run.
A run in which ``FUNC`` never ran has every metric excluded.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from functools import lru_cache
from pathlib import Path

from perfab.errors import ToolError, UsageError
from perfab.metrics import SIMULATED, Metric, resolve
from perfab.run.backends.base import Measurement, SameForEverySide
from perfab.machine.caches import CacheLevel, host_geometry, parse_level, resolve_geometry
from perfab.run.backends.cache_outfile import metrics_from_events, parse_out_file, sum_out_files
from perfab.specfile.backends import CACHEGRIND


__all__ = ["CachegrindBackend", "SIMULATION_NOTE", "host_geometry", "valgrind_version"]

SIMULATION_NOTE = (
    "simulated cache: user space only; no prefetcher or op cache: "
    "I1 misses are a code-footprint signal, not a stall prediction"
)
_INSTALL_FIX = "install it (apt-get install valgrind) or point valgrind= at the binary"
_TOGGLE_RE = re.compile(r"^[^\s,-][^\s,]*$")



_BRANCH_METRICS = ("branches", "branch mispredicts", "indirect branches", "indirect mispredicts")


def _resolve(valgrind: str) -> str:
    """The path of the valgrind executable; ToolError naming the fix when absent."""
    path = shutil.which(valgrind)
    if path is None:
        raise ToolError(f"valgrind not found at {valgrind!r}: {_INSTALL_FIX}")
    return path


@lru_cache(maxsize=8)
def valgrind_version(valgrind: str = "valgrind") -> str:
    """The version valgrind reports, e.g. ``"3.19.0"``; ToolError when it cannot run."""
    path = _resolve(valgrind)
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise ToolError(f"{path} --version failed ({err}): {_INSTALL_FIX}") from None
    m = re.search(r"valgrind-(\S+)", out.stdout)
    if out.returncode != 0 or not m:
        raise ToolError(f"{path} --version printed {out.stdout.strip()!r}: {_INSTALL_FIX}")
    return m.group(1)


def _status_notes(status: int) -> tuple[tuple[str, ...], str | None]:
    """Notes on how the run ended, and why its counts are partial (killed by a signal)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return (f"workload killed by {name}",), f"workload killed by {name}: the counts cover part of the run"
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
        return (f"workload exited with status {os.WEXITSTATUS(status)}",), None
    return (), None


class CachegrindBackend(SameForEverySide, declaration=CACHEGRIND):
    """Instruction and cache-miss counts from valgrind's cache simulator."""

    @classmethod
    def from_measure(cls, measure) -> "CachegrindBackend":
        """The cache geometry, toggle and branch simulation of ``[measure]``."""
        return cls(l1i=measure.l1i, l1d=measure.l1d, ll=measure.ll, callgrind_toggle=measure.callgrind_toggle,
                   branch_sim=measure.branch_sim)

    def __init__(
        self,
        l1i: str | None = None,
        l1d: str | None = None,
        ll: str | None = None,
        valgrind: str = "valgrind",
        callgrind_toggle: str | None = None,
        *,
        trace_children: bool = True,
        branch_sim: bool = False,
    ) -> None:
        texts = (("l1i", l1i), ("l1d", l1d), ("ll", ll))
        given = {key: parse_level(key, text) for key, text in texts if text}
        if callgrind_toggle is not None and not _TOGGLE_RE.match(callgrind_toggle):
            raise UsageError(
                f"callgrind_toggle={callgrind_toggle!r} is not a function name: give one "
                'symbol name, wildcards allowed, e.g. callgrind_toggle="do_work*"'
            )
        self.geometry, self.geometry_notes = resolve_geometry(given)
        self.valgrind = _resolve(valgrind)
        self.version = valgrind_version(self.valgrind)
        self.toggle = callgrind_toggle
        self.trace_children = trace_children
        self.tool = "callgrind" if callgrind_toggle else "cachegrind"
        self.branch_sim = branch_sim  # --branch-sim=yes: conditional and indirect branch predictors

    def groups(self) -> tuple[tuple[str, ...], ...]:
        return ((),)

    def replication(self, exp, seed: int):
        """Every run is its own draw: with ``experiment.perturb`` its stack starts at a seeded offset, the same
        draw on every side (``perfab.replication``), so a verdict holds over stack placements."""
        from perfab.replication import HOST_PERTURBATIONS, RUN, Replication

        return Replication(RUN, 1, seed, HOST_PERTURBATIONS) if exp.perturb else Replication(RUN, 1, 0)

    def _out_name(self) -> str:
        return f"{self.tool}.out" + (".%p" if self.trace_children else "")

    def wrap(self, argv: list[str], scratch: Path, group: tuple[str, ...]) -> list[str]:
        if not argv:
            raise UsageError("empty workload command: give the program to run under valgrind")
        scratch = Path(scratch)
        scratch.mkdir(parents=True, exist_ok=True)
        for stale in scratch.glob(f"{self.tool}.out*"):
            stale.unlink()  # a failed run must not be credited with an earlier run's counts
        log = "valgrind.log" + (".%p" if self.trace_children else "")
        cmd = [
            self.valgrind,
            f"--tool={self.tool}",
            "--cache-sim=yes",
            f"--I1={self.geometry.i1.valgrind_arg()}",
            f"--D1={self.geometry.d1.valgrind_arg()}",
            f"--LL={self.geometry.ll.valgrind_arg()}",
            f"--{self.tool}-out-file={scratch / self._out_name()}",
            f"--log-file={scratch / log}",
        ]
        if self.trace_children:
            cmd.append("--trace-children=yes")
        if self.toggle:
            cmd.append(f"--toggle-collect={self.toggle}")
        if self.branch_sim:
            cmd.append("--branch-sim=yes")
        return [*cmd, "--", *argv]

    def _notes(self, caches: dict[str, tuple[int, int, int]]) -> tuple[str, ...]:
        """The caveat, the version and the geometry actually simulated (from the out file)."""
        geometry = self.geometry.describe()
        if {"I1", "D1", "LL"} <= caches.keys():
            geometry = " ".join(f"{k}={CacheLevel(*caches[k])}" for k in ("I1", "D1", "LL"))
        tool = f"callgrind, toggle-collect={self.toggle}" if self.toggle else "cachegrind"
        notes = [SIMULATION_NOTE, f"valgrind {self.version} ({tool})", f"cache geometry: {geometry}"]
        return (*notes, *self.geometry_notes)

    def _no_out_file(self, scratch: Path, status: int) -> str:
        """Why a run left no out file, and what to do."""
        code = os.waitstatus_to_exitcode(status)
        if code == 0 and not self.trace_children:
            return (
                f"valgrind wrote no {self.tool} out file although the run exited 0: the "
                "workload exec'd another program (a wrapper?), which valgrind ran unmeasured: "
                "use trace_children=True"
            )
        return (
            f"valgrind wrote no {self.tool} out file (exit {code}): "
            f"see {Path(scratch)}/valgrind.log* or the run's stderr"
        )

    def collect(self, scratch: Path, group: tuple[str, ...], status: int) -> Measurement:
        status_notes, partial = _status_notes(status)
        paths = sorted(Path(scratch).glob(f"{self.tool}.out*"))
        if not paths:
            return Measurement({}, notes=status_notes, failure=self._no_out_file(scratch, status))
        try:
            outs = [parse_out_file(p) for p in paths]
        except ToolError as err:
            return Measurement({}, notes=status_notes, failure=str(err))
        metrics = metrics_from_events(sum_out_files(outs))
        reason = partial
        if self.toggle and not metrics.get("instructions"):
            reason = f"callgrind_toggle={self.toggle!r} never ran: check the function name (nm the binary)"
        excluded = {name: reason for name in metrics} if reason else {}
        notes = self._notes(outs[0].caches) + status_notes
        if len(outs) > 1:
            notes += (f"counts summed over {len(outs)} processes",)
        return Measurement(metrics, excluded=excluded, notes=notes)

    def metric_info(self) -> dict[str, Metric]:
        return {name: resolve(name, simulated=True) for name in SIMULATED
                if self.branch_sim or name not in _BRANCH_METRICS}
