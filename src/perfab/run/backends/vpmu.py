"""Real counters in a KVM guest: ``perf stat`` inside the guest, on the virtual PMU.

Two ways exist to count a guest's workload with the hardware's counters:

- the vPMU: QEMU gives the guest the host CPU's PMU (``-cpu host,pmu=on``;
  KVM backs each guest counter with a host perf event that counts only in
  guest mode) and ``perf stat`` runs inside the guest around the workload;
- ``perf stat -e cycles:G,...`` on the host, on the QEMU process (``:G``:
  guest mode only).

perfab uses the vPMU.  It counts exactly the workload: perf forks the
workload, so the window is its life, as on the host with the perf backend,
and ``:u``/``:k`` mean the guest's user and kernel mode as they do there.
``:G`` on the QEMU process counts every vCPU thread from power-on to
power-off: the firmware, the guest kernel's boot, init, perfab's launcher,
idle loops and the power-off all land in the count, and cutting the
workload's window out of it would need the host to follow the guest's
markers with millisecond latency.  The vPMU also keeps one reading path:
the guest's perf 6.1 writes the same JSON the perf backend reads, so the
same no-multiplexing rule applies (a row that ran less than 100% of the
time is excluded, never scaled), and the same counter groups
(``perfab.run.backends.perfsched``) keep each run within the budget.

The budget is the host's: KVM gives the guest the host's general-purpose
counters, and a host event that uses one (the host's NMI watchdog, another
``perf``) leaves the guest fewer, so the default ``max_events_per_run`` is
what ``perfab counters`` finds usable on the host.  The guest's own NMI
watchdog would take one more: the guest boots with ``nmi_watchdog=0``.
What the vPMU cannot show: a guest counter the host had to multiplex is
invisible inside the guest (its count is low, its running time full), so
the host must not count meanwhile; and stalled-cycles events are
``<not supported>`` on Intel cores in perf 6.1's generic event table.

How the counts come back: perf writes its JSON rows to its stderr after
the workload has exited, so they are the last lines of the run's stderr
(one per event asked, in the order asked); everything before them is the
workload's.  A guest without a PMU (no vPMU given, or TCG, which emulates
none) prints ``<not supported>`` for every hardware event: ``pmu_problem``
turns that into one line before any run is stored.
"""

from __future__ import annotations

from perfab.run.backends.base import Measurement
from perfab.run.backends.perfparse import PerfStatParseError, parse_json
from perfab.run.backends.perfsched import is_software

PERF = "/usr/bin/perf"  # copied into the guest with its shared libraries
GUEST_CMDLINE = "nmi_watchdog=0"  # the guest's watchdog would hold a counter of the budget
TOOL_TIMES = ("user_time", "system_time")  # the rusage perf reports: the lost-status check needs both


def events(group: tuple[str, ...]) -> tuple[str, ...]:
    """The events perf is asked for in the guest: the group, then the tool times it lacks."""
    return (*group, *(t for t in TOOL_TIMES if t not in group))


def wrap(argv: list[str], group: tuple[str, ...], perf: str = PERF) -> list[str]:
    """The guest's command: ``perf stat -j -e <group,tool times> -- argv`` (results on its stderr)."""
    return [perf, "stat", "-j", "-e", ",".join(events(group)), "--", *argv]


def cmdline(side: str) -> str:
    """The guest kernel's command line: the side's, with the guest's NMI watchdog off."""
    return f"{side} {GUEST_CMDLINE}".strip()


def split(stderr: str, group: tuple[str, ...]) -> tuple[str, str]:
    """(the workload's stderr, perf's rows): perf's are the last lines, one per event."""
    lines = stderr.splitlines()
    wanted = len(events(group))
    rows = [i for i, line in enumerate(lines) if line.strip()]
    if len(rows) < wanted:
        return stderr, ""
    first = rows[-wanted]
    return "\n".join(lines[:first]), "\n".join(lines[first:])


def read(stderr: str, group: tuple[str, ...]) -> Measurement:
    """The guest perf's counts of one run, read by the perf backend's rules (exclusions, lost status)."""
    from perfab.run.backends.perfstat import read_counts

    workload, rows = split(stderr, group)
    if not rows:
        return Measurement({}, failure="perf stat in the guest printed no counts (the guest's stderr ended "
                                       f"{stderr[-200:]!r}); see the run's stderr")
    return read_counts(rows, group, workload)


def pmu_problem(stderr: str, group: tuple[str, ...]) -> str | None:
    """Why the guest cannot count ``group``'s hardware events (every one ``<not supported>``), or None."""
    hardware = [e for e in group if not is_software(e)]
    if not hardware:
        return None
    _, text = split(stderr, group)
    try:
        rows = parse_json(text).counters()
    except PerfStatParseError:
        return None
    asked = dict(zip(events(group), rows))
    if all(e in asked and asked[e].status == "not supported" for e in hardware):
        return (f"the guest has no PMU: perf stat inside it reads <not supported> for {', '.join(hardware)}; run "
                "under KVM with the host's PMU passed through (-cpu host,pmu=on, kvm.enable_pmu=1 on the host), or "
                "remove guest_counters")
    return None


PROBE_S = 120.0  # a KVM guest boots to its workload in seconds; under TCG (a test) in about a minute


def probe(kernel, group: tuple[str, ...], accel: str, cache_dir: str) -> str | None:
    """Why the guests cannot count ``group`` (one boot of ``kernel`` running ``perf stat`` on ``/bin/true``), or
    None: the check before any run of a session with guest_counters."""
    from perfab.kernel import qemu

    hardware = tuple(e for e in group if not is_software(e))
    if not hardware:
        return None
    result = qemu.boot(qemu.BootRequest(kernel=str(kernel), argv=tuple(wrap(["/bin/busybox", "true"], hardware)),
                                        cmdline=GUEST_CMDLINE, accel=accel, plugin=None, files=(PERF,),
                                        timeout_s=PROBE_S, deterministic=False, cache_dir=cache_dir))
    if result.failure is not None:
        return f"a probe guest running perf stat did not finish ({result.failure}); see `perfab plan --try`"
    stderr = result.stderr.decode(errors="replace")
    if not split(stderr, hardware)[1]:
        said = stderr.strip().splitlines()
        return (f"perf stat in a probe guest printed no counts (exit {result.status}: "
                f"{said[-1] if said else 'no message'}); check that {PERF} runs in the guest")
    return pmu_problem(stderr, hardware)
