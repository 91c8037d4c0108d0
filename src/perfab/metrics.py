"""Every metric perfab knows, and how it is labelled, read and judged: one catalogue.

``resolve(name)`` returns the ``Metric`` descriptor of any metric a run can
carry, whoever produced it:

- ``rusage``   the workload's ``wait4`` usage (``wall_s``, ``max_rss_kb`` ...);
- ``service``  a service's usage over each run (``service_cpu_s``, per request),
               and its counters as ``service.<event>``;
- ``machine``  interrupt counts of the machine (``interrupts.<ROW>``);
- ``backend``  ``perf stat`` events with their privilege filters (``cycles:u``)
               and the ratios derived from them (``IPC :k``, ``L1i MPKI``),
               simulated counts of valgrind or a guest's TCG plugin
               (``simulated=True``: deterministic, so the exact method applies),
               a guest's ``vmstat.<field>`` and clocks;
- ``parser``   whatever a workload prints: the parser reports the unit and the
               direction, passed as ``unit=`` and ``higher_is_better=``.

What a producer reported (or the store kept) overrides the catalogue, and
what the spec declares (``[[workload.metric]]``: label, unit, direction)
overrides both: ``resolve(name, known=stored, declared=spec_metric)``.

A metric read on a clock carries its tick as ``step`` (its grid, in its
unit), which the analysis takes as the least resolution of its values
(``perfab.analyse.grid``): no row is ``flat`` with a margin finer than it.
User and system times are tick-sampled.  The kernel charges each
scheduler tick (``CONFIG_HZ``: 4 ms on Debian's kernels) to user or
system time by what the task was doing when it fired, and wait4's
``ru_utime``/``ru_stime`` are those tick counts rescaled so that they sum
to the task's precise runtime (kernel/sched/cputime.c, ``cputime_adjust``:
``stime = stime_ticks * rtime / (stime_ticks + utime_ticks)``; a task
that took no system tick has ``utime = rtime``).  Printed in microseconds,
they are a tick count in disguise: 0.003966, 0.003936 and 0.003982 s are
one 4 ms tick each.  ``/proc/PID/stat`` (a service's times) counts in the
kernel's ``USER_HZ`` clock, ``os.sysconf("SC_CLK_TCK")``.  The catalogue
gives all four the tick of that clock, ``CLOCK_TICK_S``: the one the
kernel exports, and on x86 (``USER_HZ`` 100, ``CONFIG_HZ`` 100 to 1000)
never finer than the tick that sampled them.

This module imports nothing else of perfab, so every layer may ask it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol

TIME_UNITS = ("s", "ms", "us", "ns", "sec", "msec", "usec")  # units of a duration
INTERRUPT_COSTS = frozenset({"TLB", "CAL", "RES"})  # IPI rows of /proc/interrupts: lower is better
CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")  # the kernel's USER_HZ tick: the grid of tick-sampled CPU times


@dataclass(frozen=True)
class Metric:
    """One metric: its name, how the report titles it, its unit, which way is better, who produced it."""

    name: str  # the name its samples are stored under
    label: str  # the report's title for it
    unit: str | None  # unit of the values; None: nobody said
    direction: str | None  # "higher" or "lower" is better; None: no side is better
    exact: bool = False  # a deterministic count: equal runs give equal values, the exact method applies
    origin: str = "backend"  # who produced its samples: rusage | backend | parser | service | machine
    step: float = 0.0  # the grid its readings sit on, in its unit (a clock's tick); 0: none declared

    @property
    def higher_is_better(self) -> bool | None:
        """The direction as a flag: True for higher, False for lower, None for none."""
        return None if self.direction is None else self.direction == "higher"

    @property
    def kind(self) -> str:
        """What the number measures, read from its unit and name: time, rate, count, size or value."""
        unit = (self.unit or "").strip()
        if unit in TIME_UNITS:
            return "time"
        if unit.endswith("/s") or self.name.endswith(("/s", "_per_s")):
            return "rate"
        if unit == "count":
            return "count"
        if unit in ("KiB", "kB", "KB", "MB", "MiB", "GB", "GiB", "B", "bytes"):
            return "size"
        return "value"


class Declared(Protocol):
    """What a spec may declare of a metric (``perfab.specfile.MetricSpec``)."""

    label: str | None  # the report's title
    unit: str | None  # the unit
    higher_is_better: bool | None  # None: keep the producer's direction
    no_direction: bool  # no side is better, whatever the producer says


_KEEP = object()  # a keyword left out: the catalogue's value stands


def resolve(name: str, *, known: Metric | None = None, declared: Declared | None = None, origin: str | None = None,
            simulated: bool = False, unit=_KEEP, higher_is_better=_KEEP, exact=_KEEP) -> Metric:
    """The metric ``name``: ``known`` (what the store kept) or the catalogue's entry, then what its producer
    reported (``unit``, ``higher_is_better``, ``exact``, ``origin``), then what the spec ``declared``.

    ``simulated``: the backend counts in a simulator (valgrind, a guest's TCG plugin), so its counts are
    deterministic.  A name the catalogue does not hold is read as a ``perf stat`` event, whose set is open.
    """
    metric = known if known is not None else _catalogued(name, simulated)
    changes: dict = {} if origin is None else {"origin": origin}
    if unit is not _KEEP:
        changes["unit"] = unit
    if higher_is_better is not _KEEP:
        changes["direction"] = _direction(higher_is_better)
    if exact is not _KEEP:
        changes["exact"] = bool(exact)
    if declared is not None:
        changes.update(_declared(declared, changes.get("direction", metric.direction)))
    if all(getattr(metric, key) == value for key, value in changes.items()):
        return metric  # nothing to change (a producer repeating the catalogue): no copy per run
    return Metric(**{**metric.__dict__, **changes})  # as dataclasses.replace, a few times faster (once per run)


def _declared(decl: Declared, direction: str | None) -> dict:
    """The fields a spec's declaration overrides."""
    out: dict = {}
    if decl.label:
        out["label"] = decl.label
    if decl.unit:
        out["unit"] = decl.unit
    if decl.no_direction:
        out["direction"] = None
    elif decl.higher_is_better is not None:
        out["direction"] = _direction(decl.higher_is_better)
    else:
        out["direction"] = direction
    return out


def _direction(higher_is_better: bool | None) -> str | None:
    return None if higher_is_better is None else ("higher" if higher_is_better else "lower")


def _m(name: str, label: str, unit: str | None, direction: str | None, exact: bool = False,
       origin: str = "backend", step: float = 0.0) -> Metric:
    return Metric(name, label, unit, direction, exact, origin, step)


# The workload's wait4 rusage, in the order the report lists it.
RUSAGE = {m.name: m for m in (
    _m("wall_s", "Time elapsed (s)", "s", "lower", origin="rusage"),
    _m("user_s", "User (s)", "s", "lower", origin="rusage", step=CLOCK_TICK_S),  # tick-sampled, rescaled
    _m("sys_s", "Sys (s)", "s", "lower", origin="rusage", step=CLOCK_TICK_S),
    _m("max_rss_kb", "Max RSS (KiB)", "KiB", "lower", origin="rusage"),
    _m("vcsw", "Ctx switches vol", "count", "lower", origin="rusage"),
    _m("ivcsw", "Ctx switches invol", "count", "lower", origin="rusage"),
)}

# The run field (``RunRecord``, ``Execution``, the helper's ``Report``) each rusage metric is read from,
# in the order a run's readings list them.
RUSAGE_FIELDS = {"wall_s": "wall_s", "user_s": "user_s", "sys_s": "sys_s", "vcsw": "nvcsw", "ivcsw": "nivcsw",
                 "max_rss_kb": "max_rss_kb"}

# A service's usage over each run (the whole server tree).  User and sys are clock-tick counts
# (/proc/PID/stat); CPU is the scheduler's nanosecond accounting of the server's threads (schedstat);
# reads and writes are system calls (/proc/PID/io), deterministic per request.  Per request: divided by
# the client's request count (workload.service.requests).
SERVICE = {m.name: m for m in (
    _m("service_user_s", "Server user (s)", "s", "lower", origin="service", step=CLOCK_TICK_S),
    _m("service_sys_s", "Server sys (s)", "s", "lower", origin="service", step=CLOCK_TICK_S),
    _m("service_cpu_s", "Server CPU (s)", "s", "lower", origin="service"),
    _m("service_cpu_us_per_req", "Server CPU/req (us)", "us", "lower", origin="service"),
    _m("service_reads", "Server read calls", "count", "lower", True, "service"),
    _m("service_writes", "Server write calls", "count", "lower", True, "service"),
    _m("service_reads_per_req", "Server reads/req", "count", "lower", True, "service"),
    _m("service_writes_per_req", "Server writes/req", "count", "lower", True, "service"),
    _m("service_insns_u_per_req", "Server instructions:u/req", "count", "lower", True, "service"),
    _m("service_insns_k_per_req", "Server instructions:k/req", "count", "lower", True, "service"),
)}
# A guest's server pinned to vCPUs (service.cpus): what those vCPUs ran, and its per-request row.
SERVER_PER_REQUEST = {"service.instructions:u": "service_insns_u_per_req",
                      "service.instructions:k": "service_insns_k_per_req"}

# Counts of a simulated CPU (valgrind's caches and branch predictor; a guest's TCG plugin, split :u/:k).
SIMULATED = {m.name: m for m in (
    _m("instructions", "instructions", "count", "lower", True),
    _m("I1 misses", "I1 misses", "count", "lower", True),
    _m("D1 misses", "D1 misses", "count", "lower", True),
    _m("LL misses", "LL misses", "count", "lower", True),
    _m("I1 MPKI", "I1 MPKI", "misses/kinstr", "lower", True),
    _m("D1 refs", "D1 refs", "count", None, True),
    _m("branches", "branches", "count", "lower", True),
    _m("branch mispredicts", "branch mispredicts", "count", "lower", True),
    _m("indirect branches", "indirect branches", "count", "lower", True),
    _m("indirect mispredicts", "indirect mispredicts", "count", "lower", True),
)}

# Counts of a guest's coherence model (TCG plugin, split :u/:k): HITM, misses that found the line modified in
# another vCPU, and invalidations of other vCPUs' copies.
COHERENCE = {m.name: m for m in (
    _m("HITM", "HITM", "count", "lower", True),
    _m("invalidations", "invalidations", "count", "lower", True),
)}

# A guest's clocks: the emulated machine's and the host's around the guest.
GUEST_CLOCKS = {m.name: m for m in (
    _m("emulated_wall_s", "emulated_wall_s", "s", "lower"),
    _m("guest_wall_s", "guest_wall_s", "s", "lower"),
)}

_FILTER = re.compile(r"^(?P<base>.+?):(?P<mods>[ukhGHIpPSDWe]+)$")  # perf's privilege filter suffix
_DERIVED = re.compile(r"^(?:IPC|CPI|.+ MPKI|.+ miss ratio)(?: :[ukhGHIpPSDWe]+)?$")  # perfab.run.backends.perfderived
_PERF_TIMES = {"task-clock": "msec", "cpu-clock": "msec", "user_time": "ns", "system_time": "ns",
               "duration_time": "ns"}  # perf's software clocks and their units


@lru_cache(maxsize=4096)
def _catalogued(name: str, simulated: bool) -> Metric:
    """The catalogue's entry for ``name`` (see the module docstring); entries are immutable, so cached."""
    match = _FILTER.match(name)
    base = match["base"] if match else name
    for table in (RUSAGE, SERVICE, GUEST_CLOCKS):
        if name in table:
            return table[name]
    for table in (SIMULATED, COHERENCE) if simulated else ():
        if base in table:
            return replace(table[base], name=name, label=name)
    if name.startswith("interrupts."):
        return _m(name, name, "count", "lower" if name.removeprefix("interrupts.") in INTERRUPT_COSTS else None,
                  origin="machine")
    if name.startswith("vmstat."):
        return _m(name, name, "count", None)
    if name.startswith("service."):
        return replace(_catalogued(name.removeprefix("service."), simulated), name=name, label=name,
                       origin="service")
    return _perf_event(name, base)


def _perf_event(name: str, base: str) -> Metric:
    """A ``perf stat`` event or a ratio derived from events (``perfab.run.backends.perfderived``)."""
    if _DERIVED.match(name):
        return _m(name, name, "", "higher" if name.startswith("IPC") else "lower")
    if base in _PERF_TIMES:
        return _m(name, name, _PERF_TIMES[base], "lower")
    costly = base.endswith(("-misses", "-faults", "faults")) or base in ("cycles", "cpu-cycles")
    return _m(name, name, "count", "lower" if costly else None)


def service_metrics(before: dict[str, float], after: dict[str, float], requests: float | None) -> dict[str, float]:
    """A run's ``SERVICE`` metrics from the server tree's usage before and after it."""
    user, sys_ = after["user_s"] - before["user_s"], after["sys_s"] - before["sys_s"]
    cpu = (after["run_ns"] - before["run_ns"]) / 1e9 if after["run_ns"] and before["run_ns"] else user + sys_
    out = {"service_user_s": user, "service_sys_s": sys_, "service_cpu_s": cpu}
    calls = {"service_reads": "syscr", "service_writes": "syscw"}
    out.update({name: after[key] - before[key] for name, key in calls.items() if key in after and key in before})
    if requests:
        out["service_cpu_us_per_req"] = 1e6 * cpu / requests
        for name in calls:
            if name in out:
                out[f"{name}_per_req"] = out[name] / requests
    return out
