"""Run a bundled study's spec through ``perfab run`` in a scratch directory, and judge the machine.

Every study builds its sides with its own Makefile (the spec's ``build``),
inside ``perfab run``, into ``.perfab/build`` under the test's directory.
Timing studies measure how busy the machine was while they ran: CPU time
other processes take (and the hypervisor steals) is noise no number of runs
can average away on two CPUs.  A verdict that holds is a pass whatever the
load; one that does not hold is a failure on a quiet machine and a skip
naming the measured load on a busy one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfab.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

# Timing studies need this much of the machine to themselves: other work
# may take at most this share of all CPUs, on average, while they run.
MAX_FOREIGN_SHARE = 0.25


def spec(study: str, name: str) -> Path:
    """``examples/<study>/<name>``, which must exist."""
    path = EXAMPLES / study / name
    assert path.is_file(), path
    return path


def cli(*args: str) -> tuple[int, str, str]:
    """``perfab ARGS`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def run_json(spec_path: Path, db: Path) -> dict:
    """``perfab run SPEC --format json``: the report as a dict; the run must succeed."""
    code, out, err = cli("run", str(spec_path), "--db", str(db), "--format", "json")
    assert code == 0, err
    return json.loads(out)


def run_study(spec_path: Path, work: Path) -> dict:
    """``perfab run SPEC`` with ``work`` as the working directory (builds land in ``work/.perfab/build``)."""
    with contextlib.chdir(work):
        return run_json(spec_path, work / "results.db")


def verdict(row: dict) -> str:
    """A report row in one line: metric, point, side, verdict and delta."""
    point = " ".join(f"{k}={v}" for k, v in row.get("params", {}).items())
    return f"{row['metric']} {point} {row['variant']}: {row['verdict']} {100 * row['delta']:+.1f}%".replace("  ", " ")


def rows_by(doc: dict, *keys: str) -> dict:
    """The report's comparison rows keyed by ``keys`` (``metric``, ``variant``, or a sweep parameter)."""
    def key(r: dict):
        vals = tuple(r["params"][k] if k in r.get("params", {}) else r[k] for k in keys)
        return vals[0] if len(vals) == 1 else vals
    return {key(r): r for r in doc["rows"]}


@dataclass(frozen=True)
class Load:
    """CPU time the rest of the machine took over an interval."""

    elapsed_s: float  # wall time of the interval
    cpus: int  # online CPUs
    own_s: float  # CPU time of this process and its waited-for children (perfab's workloads among them)
    foreign_s: float  # the rest of the machine's busy CPU time, steal included
    loadavg_1m: float  # the 1-minute load average at the end

    @property
    def share(self) -> float:
        """Foreign CPU time as a share of all the CPU time there was."""
        return self.foreign_s / (self.elapsed_s * self.cpus) if self.elapsed_s > 0 else 0.0

    def describe(self) -> str:
        return (f"other processes and the hypervisor took {self.foreign_s:.2f} CPU-seconds of "
                f"{self.elapsed_s * self.cpus:.2f} ({100 * self.share:.0f}% of {self.cpus} CPUs; "
                f"load average {self.loadavg_1m:.2f})")


class LoadMeter:
    """Foreign CPU time between ``start()`` and ``stop()``, from /proc/stat and getrusage."""

    def start(self) -> LoadMeter:
        self._t0, self._busy0, self._own0 = time.monotonic(), _busy_s(), _own_s()
        return self

    def stop(self) -> Load:
        elapsed, busy, own = time.monotonic() - self._t0, _busy_s() - self._busy0, _own_s() - self._own0
        return Load(elapsed, os.sysconf("SC_NPROCESSORS_ONLN"), own, max(0.0, busy - own), os.getloadavg()[0])


def _busy_s() -> float:
    """All CPUs' non-idle time since boot: user, nice, system, irq, softirq and steal."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) * TICK_S


def _own_s() -> float:
    """CPU time of this process and every child it (and they) waited for."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def require_cpus(count: int) -> None:
    """Skip unless this process may run on ``count`` CPUs."""
    usable = len(os.sched_getaffinity(0))
    if usable < count:
        pytest.skip(f"this study needs {count} CPUs; this process may use {usable}")


def judged_on_quiet_machine(load: Load, check) -> None:
    """Run ``check()``; a failure on a machine that was busy during the runs (``load``) becomes a skip naming it."""
    try:
        check()
    except AssertionError as err:
        if load.share > MAX_FOREIGN_SHARE:
            pytest.skip(f"machine busy during the runs: {load.describe()}; the verdicts were not judged "
                        f"(first failed check: {str(err).splitlines()[0][:200]})")
        raise
