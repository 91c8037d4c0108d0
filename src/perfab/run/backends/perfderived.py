"""Metrics derived from raw ``perf stat`` counts: IPC, CPI, MPKI, miss ratios.

Always from raw counts, never from perf's metric column (rounded to two or
three digits in CSV, and computed by perf from whatever shared the run).

``derived_metrics`` takes any mapping of event -> count, so the backend uses
it on one run's counts and the report can use it on pooled means: IPC pooled
over runs is ``mean(instructions) / mean(cycles)`` (a ratio of totals), which
is not the mean of per-run IPCs.

Names (``X`` is a privilege filter such as ``u`` or ``k``, empty when none):

- ``IPC`` / ``CPI``, or ``IPC :X`` when ``instructions:X`` and ``cycles:X`` are both present.
- ``<short> MPKI :X`` = 1000 * ``<miss event>:X`` / ``instructions:X``, falling back
  to ``instructions`` (all domains) when ``instructions:X`` is absent; seed 000's
  ``L1i MPKI :k`` is kernel-mode misses per thousand instructions.
- ``<short> miss ratio :X`` = misses / accesses of the same filter only
  (``X-load-misses`` over ``X-loads``, ``cache-misses`` over ``cache-references``,
  ``branch-misses`` over ``branches``).
"""

from __future__ import annotations

from collections.abc import Mapping

from perfab.run.backends.perfsched import split_modifiers

# Short labels for the generic hardware-cache miss events.
_SHORT = {
    "L1-icache-load-misses": "L1i", "L1-icache-misses": "L1i", "L1-dcache-load-misses": "L1d",
    "LLC-load-misses": "LLC", "iTLB-load-misses": "iTLB", "dTLB-load-misses": "dTLB",
    "branch-misses": "branch", "cache-misses": "cache",
}  # fmt: skip
# Miss event base -> the access event base it is a fraction of.
_ACCESSES = {"cache-misses": "cache-references", "branch-misses": "branches"}


def derived_metrics(counts: Mapping[str, float]) -> dict[str, float]:
    """IPC, CPI, MPKI and miss ratios computable from ``counts`` (see module docstring).

    A ratio whose denominator is zero or missing is left out, never reported
    as 0 or inf.
    """
    out: dict[str, float] = {}
    for event, value in counts.items():
        base, mods = split_modifiers(event)
        suffix = f" :{mods}" if mods else ""
        if base == "instructions":
            cycles = counts.get(event.replace("instructions", "cycles", 1))
            _ratio(out, f"IPC{suffix}", value, cycles)
            _ratio(out, f"CPI{suffix}", cycles, value)
        elif base in _SHORT or base.endswith("-misses"):
            label = _SHORT.get(base, base.removesuffix("-misses"))
            insns = counts.get(f"instructions:{mods}" if mods else "instructions", counts.get("instructions"))
            _ratio(out, f"{label} MPKI{suffix}", value * 1000.0 if value is not None else None, insns)
            access = _ACCESSES.get(base) or (base[: -len("-misses")] + "s" if base.endswith("-load-misses") else "")
            accesses = counts.get(f"{access}:{mods}" if mods else access) if access else None
            _ratio(out, f"{label} miss ratio{suffix}", value, accesses)
    return out


def derived_names(groups: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every derived metric some group can produce, in first-seen order."""
    names: dict[str, None] = {}
    for group in groups:
        names.update(dict.fromkeys(derived_metrics(dict.fromkeys(group, 1.0))))
    return list(names)


def _ratio(out: dict[str, float], name: str, num: float | None, den: float | None) -> None:
    if num is not None and den is not None and den != 0:
        out[name] = num / den
