"""What the planned runs per side can and cannot show, said before any run (``perfab plan``).

The rank test's smallest two-sided p-value with n and m runs is
``2 / C(n + m, n)``, reached only when every run of one side lies beyond
every run of the other; at 3 + 3 runs it is 0.1, so no row judged by the
rank test can reach alpha 0.05 however large the change.  Rows of counts
declared exact are judged by the exact method only when their counts
repeat; counts that vary (a kernel A/B whose instruction counts moved with
the boot, read +51% ``ns`` at 3 runs per side) fall back to the rank test
and its limit.  With one run per side nothing shows that counts repeat, so
exact rows are unchecked and never ``**`` (``methods.AssumeExact``).

Method: the exact null distribution of the Mann-Whitney U statistic (Mann
& Whitney, Ann. Math. Statist. 18 (1947) 50-60), whose most extreme value
has probability ``1 / C(n + m, n)`` per tail, assuming no ties (ties and
the multiplicity adjustment across rows only raise the smallest p).

This module imports no numerical library: ``perfab plan`` stays fast.
"""

from __future__ import annotations

import math


def smallest_p(n: int, m: int) -> float:
    """The rank test's smallest two-sided p-value with n and m runs (1 when a side is empty)."""
    if n == 0 or m == 0:
        return 1.0
    return min(1.0, 2 / math.comb(n + m, n))


def runs_needed(alpha: float) -> int:
    """The fewest runs per side (equal sides) at which the rank test can reach ``alpha``."""
    n = 2
    while smallest_p(n, n) > alpha:
        n += 1
    return n


def plan_warnings(runs: int, alpha: float, exact_rows: bool, unit: str = "run") -> list[str]:
    """One line per verdict the planned ``runs`` per side can never give; [] when every verdict is possible.

    ``unit`` names what ``runs`` counts: runs, or boots (layout builds) when the boot (build) is the unit of
    replication (``perfab.replication``): a row is then judged on one value per boot (build)."""
    out = []
    need = runs_needed(alpha)
    key = {"boot": "measure.boots", "build": "experiment.layout_builds"}.get(unit, "runs")
    if runs < need:
        out.append(f"with {runs} {unit}(s) per side the rank test can never reach alpha {alpha:g} (smallest p "
                   f"{smallest_p(runs, runs):.2g}): no row whose {unit}s vary can be `**`, exact counts included when "
                   f"they do not repeat; plan at least {need} {unit}s per side ({key})")
    if runs < 2 and exact_rows:
        out.append(f"with 1 {unit} per side nothing shows that deterministic counts repeat: exact rows are unchecked "
                   f"and never `**` or `flat`; plan at least 2 {unit}s per side (the second checks the first)")
    return out
