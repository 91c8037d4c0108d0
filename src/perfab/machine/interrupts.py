"""Interrupt counts of the whole machine, read from ``/proc/interrupts`` around each run.

Each row (``TLB: 24275 18636 TLB shootdowns``) is summed over CPUs; the
difference across a run is that run's count, a metric of the machine (other
processes' interrupts are included), stored as ``interrupts.<ROW>`` with
source ``machine``.  TLB shootdowns, function-call and rescheduling IPIs are
costs (lower is better); other rows have no direction (``perfab.metrics.INTERRUPT_COSTS``).
"""

from __future__ import annotations

from pathlib import Path

def read_interrupts(rows: tuple[str, ...], path: Path = Path("/proc/interrupts")) -> dict[str, int] | None:
    """Totals over CPUs of the named rows; None when the file cannot be read."""
    try:
        text = path.read_text()
    except OSError:
        return None
    lines = text.splitlines()
    cpus = len(lines[0].split()) if lines else 0
    out: dict[str, int] = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        if name in rows:
            fields = rest.split()[:cpus]
            out[name] = sum(int(f) for f in fields if f.isdigit())
    return out


def missing_rows(rows: tuple[str, ...], path: Path = Path("/proc/interrupts")) -> list[str]:
    """The rows this machine's /proc/interrupts does not have ([] when it cannot be read: each run says so)."""
    found = read_interrupts(rows, path)
    return [] if found is None else [r for r in rows if r not in found]


def interrupt_deltas(before: dict[str, int] | None, after: dict[str, int] | None,
                     rows: tuple[str, ...]) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, exclusions): ``interrupts.<ROW>`` counts over a run, or why a row could not be counted."""
    metrics, excluded = {}, {}
    for row in rows:
        name = f"interrupts.{row}"
        if before is None or after is None:
            excluded[name] = "/proc/interrupts could not be read"
        elif row not in before or row not in after:
            excluded[name] = f"no row {row!r} in /proc/interrupts on this machine"
        else:
            metrics[name] = float(after[row] - before[row])
    return metrics, excluded
