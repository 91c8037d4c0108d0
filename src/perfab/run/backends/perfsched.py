"""Which counters each ``perf stat`` run carries: groups that fit the PMU.

A PMU has a few general-purpose counters; asking for more events than it
has makes the kernel multiplex them, and a multiplexed count is an
extrapolation, not a measurement.  So perfab splits the requested counters
into groups that each fit ``budget`` counters and spreads the runs over the
groups (seed 000: ``cycles, instructions`` plus one L1i filter per run,
``:u`` in ten runs and ``:k`` in the other ten).

Rules:

- Software events (``task-clock``, ``page-faults``, ``user_time`` ...) and
  tracepoints use no PMU counter: they ride in every group and are not counted.
- An event requested with several privilege filters (``X:u`` and ``X:k``)
  is *split*: its variants go to different groups.
- Every other hardware event is *common*: it is in every group, so ratios
  such as IPC always have both inputs in the same run.
"""

from __future__ import annotations

import re

from perfab.errors import UsageError

# Events counted by the kernel or by perf itself, not by PMU counters.
SOFTWARE_EVENTS = frozenset({
    "task-clock", "cpu-clock", "context-switches", "cs", "page-faults", "faults",
    "minor-faults", "major-faults", "cpu-migrations", "migrations", "alignment-faults",
    "emulation-faults", "user_time", "system_time", "duration_time",
})  # fmt: skip

_MODIFIER_RE = re.compile(r"^(?P<base>.+?):(?P<mods>[ukhGHIpPSDWe]+)$")


def split_modifiers(event: str) -> tuple[str, str]:
    """``"L1-icache-load-misses:k"`` -> ``("L1-icache-load-misses", "k")``; no filter -> ``""``."""
    match = _MODIFIER_RE.match(event)
    return (match["base"], match["mods"]) if match else (event, "")


def is_software(event: str) -> bool:
    """True for events that need no PMU counter: ``SOFTWARE_EVENTS`` and tracepoints (``sched:sched_switch``)."""
    base = split_modifiers(event)[0]
    return base in SOFTWARE_EVENTS or base.startswith("software/") or ":" in base


def check_events(counters: list[str]) -> None:
    """Raise UsageError for event strings perfab cannot map back to perf's output rows."""
    seen: set[str] = set()
    for event in counters:
        if not event or event != event.strip():
            raise UsageError(f"counter {event!r}: empty or padded event name; write it as perf list spells it")
        if "{" in event or "}" in event or _top_level_comma(event):
            raise UsageError(
                f"counter {event!r}: one event per entry; list grouped or comma-separated events separately"
            )
        if event in seen:
            raise UsageError(f"counter {event!r} is listed twice; remove the duplicate")
        seen.add(event)


def schedule_groups(counters: list[str], budget: int) -> tuple[tuple[str, ...], ...]:
    """Split ``counters`` into groups of at most ``budget`` PMU events each.

    Common events are in every group.  Split events are grouped by their
    privilege filter (all ``:u`` variants, then all ``:k`` ...) and each
    filter's list is cut into chunks of the counters left free; one group per
    chunk.  Siblings never share a group (same base, different filter), and a
    domain's events travel together, so ``L1-icache-load-misses:k`` meets
    ``instructions:k`` when both are split.  Groups keep the order of
    ``counters``.
    """
    check_events(counters)
    if budget < 1:
        raise UsageError(f"max_events_per_run = {budget}: it must be at least 1")
    split = [e for family in _split_families(counters) for e in family]
    common = [c for c in counters if not is_software(c) and c not in split]
    free = budget - len(common)
    if free < 0 or (split and free == 0):
        raise UsageError(
            f"counters: the events every run carries ({', '.join(common)}) need {len(common)} PMU counters"
            f"{' plus one for the split events' if free == 0 else ''} but max_events_per_run is {budget};"
            " raise max_events_per_run or request fewer counters"
        )
    if not split:
        return (tuple(counters),)
    by_filter: dict[str, list[str]] = {}
    for event in counters:
        if event in split:
            by_filter.setdefault(split_modifiers(event)[1], []).append(event)
    chunks = [set(events[i : i + free]) for events in by_filter.values() for i in range(0, len(events), free)]
    return tuple(tuple(c for c in counters if c not in split or c in chunk) for chunk in chunks)


def _split_families(counters: list[str]) -> list[list[str]]:
    """Hardware events requested under several privilege filters, grouped by base event."""
    by_base: dict[str, list[str]] = {}
    for event in counters:
        if not is_software(event):
            by_base.setdefault(split_modifiers(event)[0], []).append(event)
    return [variants for variants in by_base.values() if len(variants) > 1]


def _top_level_comma(event: str) -> bool:
    """A comma outside ``pmu/.../`` terms separates two events."""
    depth = 0
    for char in event:
        if char == "/":
            depth ^= 1
        elif char == "," and depth == 0:
            return True
    return False
